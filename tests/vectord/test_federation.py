"""Federated search ranks exactly like one corpus holding the union.

A data set is stored once as one corpus and once split into three by a hash of the id;
a multi-corpus search over the three must return the union's ids, in the union's order,
with the union's scores (to 1e-9), in every mode and fusion. Exact search throughout:
the corpora are created with defer_index, so the vector branch is a sequential scan and
HNSW's approximation plays no part.
"""

from __future__ import annotations

import hashlib
from typing import Any

import aiohttp
import numpy as np
import pytest

from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"
DIM = 8

VOCAB = ["solar", "wind", "battery", "grid", "storage", "price", "winter", "turbine",
         "panel", "inverter", "hydrogen", "nuclear", "coal", "demand", "forecast", "market",
         "carbon", "tariff", "heat", "pump"]


def _docs(n: int = 90) -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    p = 1.0 / np.arange(1, len(VOCAB) + 1)
    p /= p.sum()
    out = []
    for i in range(n):
        words = rng.choice(VOCAB, size=int(rng.integers(3, 30)), p=p)
        title = " ".join(rng.choice(VOCAB, size=int(rng.integers(1, 4)), p=p))
        out.append({"id": f"d{i:03d}", "vector": unit(DIM, 1000 + i), "title": title,
                    "text": " ".join(words), "tags": [str(rng.choice(["a", "b", "c"]))],
                    "metadata": {"type": str(rng.choice(["note", "page"]))}})
    return out


def _part(doc_id: str, parts: int = 3) -> int:
    return hashlib.sha256(doc_id.encode()).digest()[0] % parts


async def _corpus(http: aiohttp.ClientSession, base: str, docs: list[dict[str, Any]]) -> str:
    name = await make_corpus(http, base, dim=DIM, defer_index=True)
    if docs:
        status, body = await call(http, "POST", f"{base}{C}/{name}/items", {"items": docs})
        assert status == 200, body
    return name


@pytest.fixture(scope="module")
async def split(vectord_url: str) -> dict[str, Any]:
    docs = _docs()
    async with aiohttp.ClientSession() as http:
        union = await _corpus(http, vectord_url, docs)
        parts = [await _corpus(http, vectord_url, [d for d in docs if _part(d["id"]) == i])
                 for i in range(3)]
    return {"union": union, "parts": parts, "docs": docs}


async def _one(http: aiohttp.ClientSession, base: str, name: str,
               search: dict[str, Any]) -> list[dict[str, Any]]:
    status, body = await call(http, "POST", f"{base}{C}/{name}/search", search)
    assert status == 200, body
    hits: list[dict[str, Any]] = body["hits"]
    return hits


async def _many(http: aiohttp.ClientSession, base: str, names: list[str],
                search: dict[str, Any]) -> list[dict[str, Any]]:
    status, body = await call(http, "POST", f"{base}{M}", {**search, "corpora": names})
    assert status == 200, body
    assert all("error" not in r for r in body["results"]), body["results"]
    hits: list[dict[str, Any]] = body["hits"]
    return hits


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]], what: Any) -> None:
    assert [h["id"] for h in got] == [h["id"] for h in want], what
    for g, w in zip(got, want, strict=True):
        assert g["score"] == pytest.approx(w["score"], rel=1e-9, abs=1e-12), (what, g["id"])
        if w["distance"] is None:
            assert g["distance"] is None, what
        else:
            assert g["distance"] == pytest.approx(w["distance"], rel=1e-9, abs=1e-12), what
        assert g["ranks"] == w["ranks"], (what, g["id"])


QUERIES = ["solar wind", "battery storage price", "hydrogen", "heat pump tariff winter",
           "grid grid demand", "market forecast carbon coal nuclear", "turbine"]


@pytest.mark.parametrize("query", QUERIES)
async def test_lexical_equals_union(vectord_url: str, split: dict[str, Any],
                                    http: aiohttp.ClientSession, query: str) -> None:
    for k in (1, 5, 20):
        search = {"mode": "lexical", "query_text": query, "k": k}
        want = await _one(http, vectord_url, split["union"], search)
        got = await _many(http, vectord_url, split["parts"], search)
        _same(got, want, (query, k))
        assert {h["corpus"] for h in got} <= set(split["parts"])


@pytest.mark.parametrize("fusion", ["rrf", "weighted", "dbsf"])
@pytest.mark.parametrize("prefer", [None, {"tags_any": ["a"], "type": "page"}])
async def test_hybrid_equals_union(vectord_url: str, split: dict[str, Any],
                                   http: aiohttp.ClientSession, fusion: str,
                                   prefer: dict[str, Any] | None) -> None:
    for i, query in enumerate(QUERIES):
        search: dict[str, Any] = {"mode": "hybrid", "query_text": query,
                                  "query_vector": unit(DIM, 7 + i), "k": 10,
                                  "candidates": 20, "fusion": fusion}
        if prefer is not None:
            search["prefer"] = prefer
        want = await _one(http, vectord_url, split["union"], search)
        got = await _many(http, vectord_url, split["parts"], search)
        _same(got, want, (query, fusion, prefer))


async def test_filtered_lexical_and_vector_equal_union(vectord_url: str, split: dict[str, Any],
                                                       http: aiohttp.ClientSession) -> None:
    for search in ({"mode": "lexical", "query_text": "solar price", "k": 8,
                    "filter": {"tags_any": ["b"]}},
                   {"mode": "vector", "query_vector": unit(DIM, 3), "k": 8}):
        want = await _one(http, vectord_url, split["union"], search)
        got = await _many(http, vectord_url, split["parts"], search)
        assert [h["id"] for h in got] == [h["id"] for h in want], search


async def test_unmatched_corpus_takes_no_places(vectord_url: str, split: dict[str, Any],
                                                http: aiohttp.ClientSession) -> None:
    """A corpus with no lexical match takes no places (its documents only count in N)."""
    other = await _corpus(http, vectord_url, [
        {"id": f"x{i}", "vector": unit(DIM, 5000 + i), "text": f"library catalogue {i}"}
        for i in range(30)])
    search = {"mode": "lexical", "query_text": "solar wind", "k": 10}
    status, body = await call(http, "POST", f"{vectord_url}{M}",
                              {**search, "corpora": [other, *split["parts"]]})
    assert status == 200, body
    assert len(body["hits"]) == 10 and all(h["corpus"] != other for h in body["hits"])
    first = {k: v for k, v in body["results"][0].items() if k != "selection"}
    assert first == {"corpus": other, "hits": 0, "took_ms": body["results"][0]["took_ms"]}


async def test_corpus_weights_tilt_after_fusion(vectord_url: str, split: dict[str, Any],
                                                http: aiohttp.ClientSession) -> None:
    parts = split["parts"]
    search = {"mode": "lexical", "query_text": "battery storage", "k": 10}
    plain = await _many(http, vectord_url, parts, search)
    status, body = await call(http, "POST", f"{vectord_url}{M}",
                              {**search, "corpora": parts, "corpus_weights": {parts[0]: 3.0}})
    assert status == 200, body
    tilted = body["hits"]
    # merge_score = score x weight, and the list is ordered by it.
    for h in tilted:
        w = 3.0 if h["corpus"] == parts[0] else 1.0
        assert h["merge_score"] == pytest.approx(h["score"] * w, rel=1e-12)
    assert [h["merge_score"] for h in tilted] == sorted(
        (h["merge_score"] for h in tilted), reverse=True)
    assert (sum(h["corpus"] == parts[0] for h in tilted)
            >= sum(h["corpus"] == parts[0] for h in plain))
    # Vector mode: merge_distance = distance / weight.
    status, body = await call(http, "POST", f"{vectord_url}{M}", {
        "mode": "vector", "query_vector": unit(DIM, 4), "k": 10, "corpora": parts,
        "corpus_weights": {parts[1]: 0.5}})
    assert status == 200, body
    for h in body["hits"]:
        w = 0.5 if h["corpus"] == parts[1] else 1.0
        assert h["merge_distance"] == pytest.approx(h["distance"] / w, rel=1e-12)
    # Hybrid: the fused score x weight; weights all 1 keep the fused order and scores.
    hybrid = {"mode": "hybrid", "query_text": "battery storage", "query_vector": unit(DIM, 4),
              "k": 10, "corpora": parts}
    status, body = await call(http, "POST", f"{vectord_url}{M}", hybrid)
    assert status == 200, body
    assert [h["merge_score"] for h in body["hits"]] == [h["score"] for h in body["hits"]]
    assert [h["score"] for h in body["hits"]] == sorted(
        (h["score"] for h in body["hits"]), reverse=True)
    ones = {p: 1.0 for p in parts}
    status, same = await call(http, "POST", f"{vectord_url}{M}",
                              {**hybrid, "corpus_weights": ones})
    assert status == 200 and same["hits"] == body["hits"], same
    status, body = await call(http, "POST", f"{vectord_url}{M}",
                              {**hybrid, "corpus_weights": {parts[0]: 3.0}})
    assert status == 200, body
    for h in body["hits"]:
        w = 3.0 if h["corpus"] == parts[0] else 1.0
        assert h["merge_score"] == pytest.approx(h["score"] * w, rel=1e-12)
    assert [h["merge_score"] for h in body["hits"]] == sorted(
        (h["merge_score"] for h in body["hits"]), reverse=True)


async def test_keyword_interleaves_by_time(vectord_url: str,
                                           http: aiohttp.ClientSession) -> None:
    a = await _corpus(http, vectord_url, [])
    b = await _corpus(http, vectord_url, [])
    order = []
    for i in range(6):  # written one at a time, alternating corpora: a0 b1 a2 b3 a4 b5
        name = a if i % 2 == 0 else b
        status, _ = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
            {"id": f"k{i}", "vector": unit(DIM, i), "text": f"needle {i}"}]})
        assert status == 200
        order.append((name, f"k{i}"))
    hits = await _many(http, vectord_url, [a, b], {"mode": "keyword", "query_text": "needle",
                                                  "k": 6})
    assert [(h["corpus"], h["id"]) for h in hits] == order[::-1]


async def test_all_corpora_when_none_named(vectord_url: str, split: dict[str, Any],
                                           http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "POST", f"{vectord_url}{M}", {
        "mode": "lexical", "query_text": "solar", "k": 3, "exclude_corpora": [split["union"]]})
    assert status == 200, body
    names = {r["corpus"] for r in body["results"]}
    assert set(split["parts"]) <= names and split["union"] not in names


async def test_include_scores_items_retrieval_missed(vectord_url: str, split: dict[str, Any],
                                                     http: aiohttp.ClientSession) -> None:
    """`include` items are candidates in every branch, scored as any other, returned even
    below the top k (flagged `included`); a missing one is counted, never an error."""
    parts = split["parts"]
    docs = {d["id"]: d for d in split["docs"]}
    owner = {d: parts[_part(d)] for d in docs}
    for mode in ("vector", "lexical", "hybrid"):
        search: dict[str, Any] = {"mode": mode, "k": 3, "query_text": "solar wind",
                                  "query_vector": unit(DIM, 1)}
        natural = await _many(http, vectord_url, parts, search)
        top = {h["id"] for h in natural}
        far = next(d for d in sorted(docs, reverse=True) if d not in top)
        status, body = await call(http, "POST", f"{vectord_url}{M}", {
            **search, "corpora": parts,
            "include": [{"corpus": owner[far], "id": far}, {"corpus": parts[0], "id": "nope"}]})
        assert status == 200, body
        assert body["include_missing"] == 1, mode
        got = body["hits"]
        assert [h["id"] for h in got][:3] == [h["id"] for h in natural], mode
        extra = [h for h in got if h["id"] == far]
        assert len(extra) == 1 and extra[0]["corpus"] == owner[far], (mode, got)
        if mode == "vector":
            one = await _one(http, vectord_url, split["union"], {
                "mode": "vector", "query_vector": unit(DIM, 1), "k": 90})
            true = next(h for h in one if h["id"] == far)
            assert extra[0]["distance"] == pytest.approx(true["distance"], rel=1e-9)
        if mode == "lexical":
            one = await _many(http, vectord_url, parts, {**search, "k": 90})
            true = next((h for h in one if h["id"] == far), None)
            assert extra[0]["score"] == pytest.approx(true["score"] if true else 0.0,
                                                      rel=1e-9, abs=1e-12)
    status, body = await call(http, "POST", f"{vectord_url}{M}", {
        "mode": "vector", "query_vector": unit(DIM, 1), "corpora": parts,
        "include": [{"corpus": parts[0], "id": f"i{i}"} for i in range(101)]})
    assert status == 400 and body["error"]["field"] == "include", body
