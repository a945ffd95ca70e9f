"""POST /v1/vectors/search: one search over several corpora, each failure per corpus."""

from __future__ import annotations

import aiohttp
import pytest

from internal.api.vectord import Hit, MultiSearchRequest, SearchError
from internal.clients.vectord import VectordClient
from internal.common.errors import InvalidArgument, ServiceError
from tests.vectord.vdata import call, item, make_corpus, unique, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"


async def _filled(http: aiohttp.ClientSession, base: str, lo: int, hi: int) -> str:
    name = await make_corpus(http, base, dim=8)
    status, body = await call(http, "POST", f"{base}{C}/{name}/items",
                              {"items": [item(i, 8, tags=["t"]) for i in range(lo, hi)]})
    assert status == 200, body
    return name


async def test_merged_hits_with_per_corpus_counts(vectord_url: str,
                                                 http: aiohttp.ClientSession) -> None:
    a = await _filled(http, vectord_url, 0, 20)
    b = await _filled(http, vectord_url, 20, 40)
    for search in ({"mode": "vector", "query_vector": unit(8, 3), "k": 5},
                   {"mode": "keyword", "query_text": "number 2", "k": 4},
                   {"mode": "lexical", "query_text": "document number", "k": 3},
                   {"mode": "hybrid", "query_text": "document", "query_vector": unit(8, 25),
                    "k": 5, "filter": {"tags_any": ["t"]}},
                   {"mode": "hybrid", "query_text": "document", "query_vector": unit(8, 25),
                    "k": 5}):
        status, multi = await call(http, "POST", f"{vectord_url}{M}", {**search, "corpora": [b, a]})
        assert status == 200, multi
        assert multi["mode"] == search["mode"] and multi["took_ms"] >= 0
        assert [r["corpus"] for r in multi["results"]] == [b, a]
        assert 0 < len(multi["hits"]) <= search["k"]
        for r in multi["results"]:  # `selection` once the corpora's profiles are built
            assert set(r) - {"selection"} == {"corpus", "hits", "took_ms"}
            assert r["hits"] == sum(h["corpus"] == r["corpus"] for h in multi["hits"])
    # One corpus, its candidates settled from reads shared with no statement of its own:
    # its time is still the search's, not the registry lookup's.
    search = {"mode": "hybrid", "query_text": "document", "query_vector": unit(8, 25), "k": 5}
    for _ in range(2):
        status, one = await call(http, "POST", f"{vectord_url}{M}", {**search, "corpora": [a]})
        assert status == 200, one
        assert one["results"][0]["took_ms"] >= one["took_ms"] / 2
    # Vector distances share one scale: the merge is the per-corpus lists merged by distance.
    search = {"mode": "vector", "query_vector": unit(8, 3), "k": 5}
    _, multi = await call(http, "POST", f"{vectord_url}{M}", {**search, "corpora": [b, a]})
    singles = []
    for name in (a, b):
        _, one = await call(http, "POST", f"{vectord_url}{C}/{name}/search", search)
        singles += one["hits"]
    want = sorted(singles, key=lambda h: h["distance"])[:5]
    assert [(h["corpus"], h["id"]) for h in multi["hits"]] == [
        (h["corpus"], h["id"]) for h in want]


async def test_missing_and_failing_corpora_reported_per_corpus(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    a = await _filled(http, vectord_url, 0, 10)
    wide = await make_corpus(http, vectord_url, dim=4)  # query_vector has the wrong length here
    missing = unique("gone")
    body = {"mode": "vector", "query_vector": unit(8, 1), "k": 3, "corpora": [missing, a, wide]}
    status, out = await call(http, "POST", f"{vectord_url}{M}", body)
    assert status == 200, out
    gone, ok, bad = out["results"]
    assert [r["corpus"] for r in out["results"]] == [missing, a, wide]
    assert out["hits"][0]["id"] == "doc-0001" and ok["hits"] == 3 == len(out["hits"])
    # Each error is what the per-corpus route answers for that corpus.
    for r in (gone, bad):
        assert set(r) == {"corpus", "error", "status"}
        st, single = await call(http, "POST", f"{vectord_url}{C}/{r['corpus']}/search",
                                {k: v for k, v in body.items() if k != "corpora"})
        assert r["status"] == st and r["error"] == single["error"]
    assert gone["status"] == 404 and gone["error"]["code"] == "not_found"
    assert bad["status"] == 400 and bad["error"]["field"] == "query_vector"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "query_vector"),  # corpora absent: every corpus; the query is still needed
    ({"corpora": []}, "corpora"),
    ({"corpora": ["a"], "corpus_weights": {"b": 1.0}}, "corpus_weights.b"),
    ({"corpora": ["a"], "corpus_weights": {"a": 0}}, "corpus_weights.a"),
    ({"corpora": ["a"], "corpus_weights": {"a": -1}}, "corpus_weights.a"),
    ({"corpora": ["Bad-Name"]}, "corpora[0]"),
    ({"corpora": ["a", "a"]}, "corpora[1]"),
    ({"corpora": ["a"], "k": 0}, "k"),
    ({"corpora": ["a"], "ef_search": 5000}, "ef_search"),
    ({"corpora": ["a"], "bogus": 1}, "bogus"),
])
async def test_request_wide_faults_are_400(vectord_url: str, http: aiohttp.ClientSession,
                                           body: dict[str, object], field: str) -> None:
    status, out = await call(http, "POST", f"{vectord_url}{M}", body)
    assert status == 400, out
    assert out["error"]["field"] == field


async def test_client_search_many(vectord_url: str, http: aiohttp.ClientSession) -> None:
    a = await _filled(http, vectord_url, 0, 10)
    client = VectordClient(http, vectord_url)
    missing = unique("gone")
    out = await client.search_many(MultiSearchRequest(
        corpora=[a, missing], mode="vector", query_vector=unit(8, 2), k=2), Hit)
    assert isinstance(out.hits[0], Hit)
    assert out.hits[0].id == "doc-0002" and out.results[0].hits == 2
    assert out.results[1].status == 404 and isinstance(out.results[1].error, SearchError)
    assert out.results[1].error.code == "not_found"
    with pytest.raises(ServiceError) as info:
        await client.search_many(MultiSearchRequest(  # built unchecked: vectord checks it
            corpora=[a], mode="vector", query_vector=unit(8, 2), k=0), Hit)
    assert info.value.status == 400 and info.value.field == "k"
    assert isinstance(info.value, InvalidArgument)  # vectord's 400 is an InvalidArgument too
