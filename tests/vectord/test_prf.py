"""Pseudo-relevance feedback of hybrid search: prf.py and vectord's prf option."""

from __future__ import annotations

from typing import Any

import aiohttp
import numpy as np
import pytest

from internal.vectord.search import prf
from tests.vectord.test_federation import (  # noqa: F401
    QUERIES,
    _corpus,
    _docs,
    _many,
    _one,
    _same,
    split,
)
from tests.vectord.vdata import call, unit

C = "/v1/vectors/corpora"
DIM = 8


def test_rocchio_moves_toward_the_feedback_and_keeps_the_norm() -> None:
    q = np.array([2.0, 0.0, 0.0], dtype=np.float32)
    docs = [np.array([0.0, 3.0, 0.0], dtype=np.float32), np.array([0.0, 1.0, 0.0], dtype=np.float32)]
    moved = prf.rocchio(q, docs, 1.0)
    # q/|q| + 1 * mean(unit docs) = (1, 1, 0), rescaled to |q| = 2.
    assert np.allclose(moved, [np.sqrt(2), np.sqrt(2), 0.0], atol=1e-6)
    assert prf.rocchio(q, docs, 0.0) is q
    assert prf.rocchio(q, [], 1.0) is q


def test_relevance_model_and_expansion_by_hand() -> None:
    docs = {"a": {"x": 2.0, "y": 2.0}, "b": {"y": 1.0, "z": 3.0}}
    model = prf.relevance_model(docs, {"a": 3.0, "b": 1.0})
    # P(a)=0.75, P(b)=0.25: x 0.75*0.5, y 0.75*0.5 + 0.25*0.25, z 0.25*0.75.
    assert model == pytest.approx({"x": 0.375, "y": 0.4375, "z": 0.1875})
    mixed = prf.expand({"q": 2.0, "x": 1.0}, model, terms=2, weight=1.0)
    # Best two: y 0.4375, x 0.375 (sum 0.8125); query model q 2/3, x 1/3; (Q + R) / 2.
    assert mixed == pytest.approx({"q": 1 / 3, "x": 1 / 6 + 0.375 / 0.8125 / 2,
                                   "y": 0.4375 / 0.8125 / 2})
    assert sum(mixed.values()) == pytest.approx(1.0)
    assert prf.expand({"q": 1.0}, model, terms=0, weight=1.0) == {"q": 0.5}


def test_best_first_is_the_prefix_of_the_whole_order() -> None:
    # Ties at the k-th weight, all equal, fewer lexemes than k: the prefix of sorting all.
    rng = np.random.default_rng(3)
    for size in (0, 1, 5, 40, 300, 1200):
        words = [f"w{int(x)}" for x in rng.integers(0, 10 * size + 1, size)]
        weights = rng.choice([0.5, 0.25, 0.125, 0.01], size) if size % 2 else rng.random(size)
        model = {w: float(x) for w, x in zip(words, weights, strict=True)}
        whole = sorted(model, key=lambda t: (-model[t], t))
        for k in (1, 2, 7, 40, 120, len(model), len(model) + 5):
            got = prf.best_first(model, k)
            assert len(got) >= min(k, len(model))
            assert got == whole[:len(got)]
            assert len(got) == len(model) or model[got[-1]] > model[whole[len(got)]]


def test_settings_checked() -> None:
    """The ranges are the wire type's, checked when a request is decoded (the 400 names
    the field): the settings trust what was decoded."""
    import msgspec

    from internal.api.vectord import Prf, SearchRequest
    from internal.common.web import validation_field

    assert prf.settings(None) == prf.DEFAULT
    assert not prf.settings(Prf(docs=0, terms=10, weight=1.0)).on
    assert prf.settings(Prf(docs=3, terms=0, weight=0.5)).on
    for bad, field in (({"docs": -1}, "prf.docs"), ({"docs": 3, "terms": 1000}, "prf.terms"),
                       ({"docs": 3, "weight": 11.0}, "prf.weight")):
        with pytest.raises(msgspec.ValidationError) as exc:
            msgspec.json.decode(msgspec.json.encode({"prf": bad}), type=SearchRequest)
        assert validation_field(str(exc.value)) == field


def _search(i: int, query: str, fusion: str, **extra: Any) -> dict[str, Any]:
    return {"mode": "hybrid", "query_text": query, "query_vector": unit(DIM, 7 + i), "k": 10,
            "candidates": 20, "fusion": fusion, **extra}


@pytest.mark.parametrize("fusion", ["rrf", "weighted", "dbsf"])
async def test_prf_off_when_docs_is_zero(vectord_url: str, split: dict[str, Any],  # noqa: F811
                                         http: aiohttp.ClientSession, fusion: str) -> None:
    for i, query in enumerate(QUERIES):
        plain = await _one(http, vectord_url, split["union"],
                           _search(i, query, fusion, prf={"docs": 0}))
        for off in ({"docs": 0, "terms": 10, "weight": 1.0}, {"docs": 0, "weight": 2.0}):
            got = await _one(http, vectord_url, split["union"], _search(i, query, fusion, prf=off))
            _same(got, plain, (query, fusion, off))
        # weight 0 changes nothing either
        got = await _one(http, vectord_url, split["union"],
                         _search(i, query, fusion, prf={"docs": 5, "terms": 5, "weight": 0.0}))
        _same(got, plain, (query, fusion, "weight 0"))


@pytest.mark.parametrize("feedback", [{"docs": 3, "terms": 0, "weight": 1.0},
                                      {"docs": 3, "terms": 5, "weight": 0.5, "vector": False},
                                      {"docs": 5, "terms": 5, "weight": 1.0}])
async def test_prf_federated_equals_union(vectord_url: str, split: dict[str, Any],  # noqa: F811
                                          http: aiohttp.ClientSession,
                                          feedback: dict[str, Any]) -> None:
    changed = 0
    for i, query in enumerate(QUERIES):
        search = _search(i, query, "weighted", prf=feedback)
        want = await _one(http, vectord_url, split["union"], search)
        got = await _many(http, vectord_url, split["parts"], search)
        _same(got, want, (query, feedback))
        plain = await _one(http, vectord_url, split["union"], _search(i, query, "weighted"))
        changed += [h["id"] for h in want] != [h["id"] for h in plain]
    assert changed > 0  # feedback moved at least one ranking


@pytest.mark.parametrize("fusion", ["rrf", "weighted", "dbsf"])
async def test_prf_with_preferences_federated_equals_union(
        vectord_url: str, split: dict[str, Any], http: aiohttp.ClientSession,  # noqa: F811
        fusion: str) -> None:
    # A candidate new in the feedback pass gets its true symbolic score (it once got 0
    # unless some part had listed it in the first pass, so parts and union differed).
    prefer = {"tags_any": ["a"], "type": "page"}
    for i, query in enumerate(QUERIES):
        search = _search(i, query, fusion, prefer=prefer,
                         prf={"docs": 3, "terms": 5, "weight": 0.5})
        want = await _one(http, vectord_url, split["union"], search)
        got = await _many(http, vectord_url, split["parts"], search)
        _same(got, want, (query, fusion))


async def test_default_prf_from_100_documents_where_it_is_worth(
        vectord_url: str, split: dict[str, Any], http: aiohttp.ClientSession  # noqa: F811
        ) -> None:
    # Below 100 documents (the split's union holds 90) the default is no feedback; from 100
    # on it is prf.DEFAULT (RM3 from the top 10, 10 lexemes, weight 0.5) for a question its
    # gate lets through (prf.worth_expanding) and nothing for the others: a name or two
    # ("hydrogen", "solar wind") is never expanded, an explicit `prf` always is.
    d = prf.DEFAULT
    explicit = {"docs": d.docs, "terms": d.terms, "weight": d.weight, "vector": d.vector}
    big = await _corpus(http, vectord_url, _docs(140))
    moved = skipped = 0
    for i, query in enumerate(QUERIES):
        small_default = await _one(http, vectord_url, split["union"], _search(i, query, "weighted"))
        small_off = await _one(http, vectord_url, split["union"],
                               _search(i, query, "weighted", prf={"docs": 0}))
        _same(small_default, small_off, (query, "under 100 documents"))
        big_default = await _one(http, vectord_url, big, _search(i, query, "weighted"))
        big_explicit = await _one(http, vectord_url, big, _search(i, query, "weighted", prf=explicit))
        big_off = await _one(http, vectord_url, big, _search(i, query, "weighted", prf={"docs": 0}))
        if len(set(query.split())) < prf.MIN_LEXEMES:
            _same(big_default, big_off, (query, "too few lexemes: skipped"))
            skipped += 1
        elif [h["id"] for h in big_default] == [h["id"] for h in big_explicit]:
            _same(big_default, big_explicit, (query, "from 100 documents"))
            moved += [h["id"] for h in big_default] != [h["id"] for h in big_off]
        else:  # the gate closed on the first pass's evidence (a name the question holds)
            _same(big_default, big_off, (query, "skipped"))
    assert moved > 0 and skipped > 0


def test_feedback_gate_on_constructed_cases() -> None:
    """Selective feedback: a question of a name or two, one that names an item, or one
    read as character bigrams is not expanded; a longer one is."""
    assert prf.worth_expanding(lexemes=5, named=False)
    assert not prf.worth_expanding(lexemes=1, named=False)
    assert not prf.worth_expanding(lexemes=prf.MIN_LEXEMES - 1, named=False)
    assert prf.worth_expanding(lexemes=prf.MIN_LEXEMES, named=False)
    assert not prf.worth_expanding(lexemes=6, named=True)
    assert not prf.worth_expanding(lexemes=6, named=False, bigrams=True)


async def test_prf_bad_input_is_a_400(vectord_url: str, split: dict[str, Any],  # noqa: F811
                                      http: aiohttp.ClientSession) -> None:
    for bad, field in (({"docs": 100}, "prf.docs"), ({"docs": 2, "terms": -1}, "prf.terms"),
                       ({"docs": 2, "weight": -1}, "prf.weight"), ({"dogs": 2}, "prf.dogs")):
        status, body = await call(http, "POST", f"{vectord_url}{C}/{split['union']}/search",
                                  _search(0, "solar wind", "weighted", prf=bad))
        assert status == 400, body
        assert body["error"]["field"] == field, body


def test_common_feedback_lexemes_are_left_out_but_the_query_keeps_its_own() -> None:
    model = {"rare": 0.5, "common": 0.3, "query": 0.2}
    df = {"rare": 5.0, "common": 40.0, "query": 90.0}
    kept = prf.without_common(model, df, 100.0, {"query"}, share=0.25)
    assert kept == {"rare": 0.5, "query": 0.2}
    assert prf.without_common(model, df, 100.0, set(), share=0.4) == {"rare": 0.5, "common": 0.3}
