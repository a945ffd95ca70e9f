"""The symbolic layer and the fusion options through the real vectord app."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from internal.vectord.search import fusion
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"

ITEMS: list[dict[str, Any]] = [
    {"id": "a", "text": "solar panels on the roof", "tags": ["energy", "home"],
     "metadata": {"type": "note", "importance": 5, "date": "2024-03-01", "parent_id": "p1"}},
    {"id": "b", "text": "wind turbines offshore energy", "tags": ["energy"],
     "metadata": {"type": "article", "importance": 2, "date": "2023-07-15"}},
    {"id": "c", "text": "roof repair costs for old homes", "tags": ["home"],
     "metadata": {"type": "note", "importance": "high", "date": "not a date", "parent_id": "p1"}},
    {"id": "d", "text": "energy storage batteries for solar homes", "tags": [],
     "metadata": {"type": "faq", "importance": 9}},
]


@pytest.fixture
async def corpus(vectord_url: str, http: aiohttp.ClientSession) -> str:
    name = await make_corpus(http, vectord_url, language="english")
    items = [{**it, "vector": unit(8, i)} for i, it in enumerate(ITEMS)]
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": items})
    assert status == 200, body
    return name


async def search(http: aiohttp.ClientSession, base: str, name: str, **req: Any) -> list[dict[str, Any]]:
    status, body = await call(http, "POST", f"{base}{C}/{name}/search", req)
    assert status == 200, body
    hits: list[dict[str, Any]] = body["hits"]
    return hits


@pytest.mark.parametrize(("flt", "expected"), [
    ({"tags_any": ["home"]}, {"a", "c"}),
    ({"tags_all": ["energy", "home"]}, {"a"}),
    ({"type": "note"}, {"a", "c"}),
    ({"type": ["faq", "article"]}, {"b", "d"}),
    ({"date": {"field": "date", "after": "2024-01-01T00:00:00Z"}}, {"a"}),
    ({"date": {"field": "date", "before": "2024-01-01T00:00:00Z"}}, {"b"}),
    ({"range": {"field": "importance", "gte": 5}}, {"a", "d"}),
    ({"range": {"field": "importance", "gt": 2, "lt": 9}}, {"a"}),
    ({"parent_id": "p1"}, {"a", "c"}),
    ({"has": ["parent_id", "date"]}, {"a", "c"}),
    ({"tags_any": ["energy"], "range": {"field": "importance", "lte": 3}}, {"b"}),
])
async def test_symbolic_filters_in_every_mode(corpus: str, vectord_url: str,
                                              http: aiohttp.ClientSession,
                                              flt: dict[str, Any], expected: set[str]) -> None:
    vec = await search(http, vectord_url, corpus, mode="vector", query_vector=unit(8, 0), k=10, filter=flt)
    assert {h["id"] for h in vec} == expected
    for method in fusion.METHODS:
        hyb = await search(http, vectord_url, corpus, mode="hybrid", query_vector=unit(8, 0),
                           query_text="energy roof solar homes", k=10, filter=flt, fusion=method)
        assert {h["id"] for h in hyb} <= expected and hyb, method


async def test_preferences_give_a_symbolic_score_and_lift_matches(
        corpus: str, vectord_url: str, http: aiohttp.ClientSession) -> None:
    base = {"mode": "hybrid", "query_vector": unit(8, 3), "query_text": "energy", "k": 10}
    plain = await search(http, vectord_url, corpus, **base, fusion="weighted")
    assert all("symbolic" not in h["matched_layers"] for h in plain)
    prefer = {"type": "note", "tags_any": ["home"]}
    for method in fusion.METHODS:
        hits = await search(http, vectord_url, corpus, **base, fusion=method, prefer=prefer,
                            weights={"vector": 0.1, "lexical": 0.1, "symbolic": 0.8})
        by_id = {h["id"]: h for h in hits}
        assert hits[0]["id"] in {"a", "c"}, method  # both preferences met
        assert by_id["a"]["scores"]["symbolic"] == 1.0
        assert "symbolic" in by_id["a"]["matched_layers"]
        if "b" in by_id:  # type article, tags energy: no preference met
            assert by_id["b"]["scores"]["symbolic"] == 0.0
            assert "symbolic" not in by_id["b"]["matched_layers"]


async def test_weighted_and_dbsf_match_the_reference_fusion(
        corpus: str, vectord_url: str, http: aiohttp.ClientSession) -> None:
    q = {"query_vector": unit(8, 1), "query_text": "energy solar homes roof", "k": 10}
    vec = await search(http, vectord_url, corpus, mode="vector", **{**q, "query_text": None})
    lex = await search(http, vectord_url, corpus, mode="lexical", **{**q, "query_vector": None})
    branches = {"vector": [(h["id"], h["scores"]["vector"]) for h in vec],
                "lexical": [(h["id"], h["score"]) for h in lex]}
    for method in ("weighted", "dbsf"):
        want = fusion.fuse(method, branches)
        got = await search(http, vectord_url, corpus, mode="hybrid", fusion=method, **q)
        assert [h["id"] for h in got] == [f.id for f in want]
        assert [h["score"] for h in got] == pytest.approx([f.score for f in want])
        for h in got:
            both = h["ranks"]["vector"] is not None and h["ranks"]["lexical"] is not None
            assert ("lexical" in h["matched_layers"] and "vector" in h["matched_layers"]) == both
            assert h["scores"]["vector"] is not None or h["ranks"]["vector"] is None


async def test_hits_of_every_mode_report_matched_layers(
        corpus: str, vectord_url: str, http: aiohttp.ClientSession) -> None:
    vec = await search(http, vectord_url, corpus, mode="vector", query_vector=unit(8, 1), k=2)
    assert all(h["matched_layers"] == ["vector"] for h in vec)
    lex = await search(http, vectord_url, corpus, mode="lexical", query_text="roof", k=5)
    assert lex and all(h["matched_layers"] == ["lexical"] for h in lex)
    rrf = await search(http, vectord_url, corpus, mode="hybrid", query_vector=unit(8, 1),
                       query_text="roof", k=5)
    assert any(h["matched_layers"] == ["vector", "lexical"] for h in rrf)


@pytest.mark.parametrize(("req", "field"), [
    ({"fusion": "borda"}, "fusion"),
    ({"fusion": "weighted", "weights": {"semantic": 1.0}}, "weights.semantic"),
    ({"fusion": "dbsf", "weights": {"lexical": -1}}, "weights.lexical"),
    ({"prefer": {}}, "prefer"),
    ({"filter": {"range": {"field": "importance"}}}, "filter.range"),
    ({"filter": {"range": {"field": "x'; drop", "gte": 1}}}, "filter.range.field"),
    ({"filter": {"date": {"field": "date", "after": "2024-02-01T00:00:00Z",
                          "before": "2024-01-01T00:00:00Z"}}}, "filter.date.before"),
    ({"filter": {"type": []}}, "filter.type"),
])
async def test_bad_fusion_and_filter_input_names_the_field(
        corpus: str, vectord_url: str, http: aiohttp.ClientSession,
        req: dict[str, Any], field: str) -> None:
    body = {"mode": "hybrid", "query_vector": unit(8, 1), "query_text": "roof", **req}
    status, out = await call(http, "POST", f"{vectord_url}{C}/{corpus}/search", body)
    assert status == 400, out
    assert out["error"]["field"] == field
