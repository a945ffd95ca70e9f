"""matrixd through the real vectord (embedded PostgreSQL) and embedd (local model), in-process."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from internal.api.embedd import INTERACTIVE_PATH
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.server import make_app
from tests.helpers import serve, url_of, with_section

ANIMALS = [
    "Cats are small domesticated felines that people keep as pets.",
    "Dogs are loyal companions and were domesticated from wolves.",
    "The elephant is the largest land animal alive today.",
    "Parrots can imitate human speech and live for decades.",
    "Goldfish are a common choice for a first pet aquarium.",
]
SPACE = [
    "The Moon orbits the Earth roughly every twenty-seven days.",
    "Jupiter is the largest planet in the Solar System.",
    "A light-year measures the distance light travels in a year.",
    "Black holes bend light because of their enormous gravity.",
    "Mars has two small moons called Phobos and Deimos.",
]


def unique(prefix: str = "mx") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


class Counter:
    """A pass-through proxy in front of the real embedd that counts embed calls."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.calls = 0
        self.paths: list[str] = []
        self.url = ""

    def app(self) -> web.Application:
        async def embed(request: web.Request) -> web.Response:
            self.calls += 1
            self.paths.append(request.path)
            async with aiohttp.ClientSession() as s, s.post(
                    f"{self.target}{request.path}", data=await request.read(),
                    headers={"Content-Type": "application/json"}) as r:
                return web.Response(status=r.status, body=await r.read(),
                                    content_type="application/json")

        async def passthrough(request: web.Request) -> web.Response:
            async with aiohttp.ClientSession() as s, s.get(f"{self.target}{request.path}") as r:
                return web.Response(status=r.status, body=await r.read(),
                                    content_type="application/json")

        app = web.Application()
        app.router.add_post("/v1/embed", embed)
        app.router.add_post(INTERACTIVE_PATH, embed)
        app.router.add_get("/readyz", passthrough)
        return app


@pytest.fixture(scope="module")
async def counter(embedd_url: str) -> AsyncIterator[Counter]:
    c = Counter(embedd_url)
    server = await serve(c.app())
    c.url = url_of(server)
    yield c
    await server.close()


async def start_matrix(base_cfg: Config, vectord_url: str, embedd_url: str,
                       **changes: Any) -> TestServer:
    cfg = with_section(base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=embedd_url,
                       **changes)
    return await serve(make_app(cfg))


@pytest.fixture(scope="module")
async def matrix(base_cfg: Config, vectord_url: str, counter: Counter) -> AsyncIterator[str]:
    server = await start_matrix(base_cfg, vectord_url, counter.url, playbook_corpus=unique("pb"))
    yield url_of(server)
    await server.close()


@pytest.fixture(scope="module")
async def two_corpora(vectord_url: str, embedd_url: str) -> AsyncIterator[tuple[str, str]]:
    """Two corpora of five items each; the same ids (d0..d4) appear in both."""
    a, b = unique("animals"), unique("space")
    async with aiohttp.ClientSession() as s:
        vec = VectordClient(s, vectord_url)
        emb = EmbedClient(s, embedd_url)
        for name, texts in ((a, ANIMALS), (b, SPACE)):
            e = await emb.embed(texts)
            await vec.create_corpus(name, e.dim, model=e.model)
            await vec.upsert(name, [
                {"id": f"d{i}", "vector": v, "text": t, "title": f"{name} {i}",
                 "tags": ["t"], "metadata": {"n": i, "nested": {"src": name, "list": [1, "x"]}}}
                for i, (t, v) in enumerate(zip(texts, e.vectors, strict=True))], model=e.model)
        yield a, b
        for name in (a, b):
            await vec.delete_corpus(name)


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


# ---- corpora and search --------------------------------------------------------------------

async def test_corpora_listed(http: aiohttp.ClientSession, matrix: str,
                              two_corpora: tuple[str, str]) -> None:
    async with http.get(f"{matrix}/v1/matrix/corpora") as r:
        assert r.status == 200
        body = await r.json()
    by_name = {c["name"]: c for c in body["corpora"]}
    for name in two_corpora:
        assert by_name[name]["count"] == 5
        assert by_name[name]["dim"] == 384
        assert by_name[name]["model"]


async def test_vector_search_across_two_corpora(http: aiohttp.ClientSession, matrix: str,
                                                two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    status, body = await post(http, f"{matrix}/v1/matrix/search",
                              {"query_text": "which pets do people keep at home", "mode": "vector",
                               "corpora": [a, b], "k": 10})
    assert status == 200, body
    hits = body["hits"]
    assert len(hits) == 10
    assert {h["corpus"] for h in hits} == {a, b}
    distances = [h["distance"] for h in hits]
    assert distances == sorted(distances)
    assert hits[0]["corpus"] == a  # a pets query: the closest hit is an animal
    assert [h["rank"] for h in hits] == list(range(1, 11))
    for h in hits:
        i = int(h["id"][1:])
        assert h["metadata"] == {"n": i, "nested": {"src": h["corpus"], "list": [1, "x"]}}
        assert h["text"] == (ANIMALS if h["corpus"] == a else SPACE)[i]
    per = {c["corpus"]: c for c in body["corpora"]}
    assert per[a]["hits"] == 5 and per[b]["hits"] == 5
    assert all(c["ms"] >= 0 for c in body["corpora"])
    assert body["failed_corpora"] == [] and body["degraded"] == []


async def test_k_and_per_corpus_k(http: aiohttp.ClientSession, matrix: str,
                                  two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    status, body = await post(http, f"{matrix}/v1/matrix/search",
                              {"query_text": "planets and moons", "mode": "vector",
                               "corpora": [a, b], "k": 3, "per_corpus_k": 5})
    assert status == 200, body
    # per_corpus_k is the depth of the merged list (since federation): 5 fetched, 3 kept.
    assert len(body["hits"]) == 3
    assert sum(c["hits"] for c in body["corpora"]) == 5


async def test_query_vector_wins_and_skips_embedding(http: aiohttp.ClientSession, matrix: str,
                                                     counter: Counter, embedd_url: str,
                                                     two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    async with aiohttp.ClientSession() as s:
        v = (await EmbedClient(s, embedd_url).embed([SPACE[1]], input_type="query")).vectors[0]
    before = counter.calls
    status, body = await post(http, f"{matrix}/v1/matrix/search",
                              {"query_text": "cats", "query_vector": v, "mode": "vector",
                               "corpora": [a, b], "k": 1})
    assert status == 200, body
    assert counter.calls == before
    assert (body["hits"][0]["corpus"], body["hits"][0]["id"]) == (b, "d1")


async def test_keyword_mode_across_corpora(http: aiohttp.ClientSession, matrix: str,
                                           two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    status, body = await post(http, f"{matrix}/v1/matrix/search",
                              {"query_text": "largest", "mode": "keyword", "corpora": [a, b]})
    assert status == 200, body
    assert {(h["corpus"], h["id"]) for h in body["hits"]} == {(a, "d2"), (b, "d1")}
    # Newest first over both corpora; a rank-based merge_score for the boost.
    stamps = [h["updated_at"] for h in body["hits"]]
    assert stamps == sorted(stamps, reverse=True)
    assert [h["merge_score"] for h in body["hits"]] == [1 / 61, 1 / 62]


# ---- errors ---------------------------------------------------------------------------------

async def test_missing_corpus_is_a_404_naming_it(http: aiohttp.ClientSession, matrix: str,
                                                 two_corpora: tuple[str, str]) -> None:
    a, _ = two_corpora
    missing = unique("nope")
    status, body = await post(http, f"{matrix}/v1/matrix/search",
                              {"query_text": "cats", "mode": "vector", "corpora": [a, missing]})
    assert status == 404, body  # refused before the question is embedded
    assert body["error"]["code"] == "corpus_not_found"
    assert body["error"]["field"] == "corpora"
    assert missing in body["error"]["message"]
    assert "did you mean" not in body["error"]["message"]


async def test_a_mistyped_corpus_gets_the_nearest_name(http: aiohttp.ClientSession, matrix: str,
                                                       two_corpora: tuple[str, str]) -> None:
    a, _ = two_corpora
    # Two letters swapped: the name's first two ("animals_…"), which always differ (the
    # last two, from a random hex suffix, were the same one time in sixteen).
    typo = a[1] + a[0] + a[2:]
    assert typo != a
    for mode in ("hybrid", "keyword"):
        status, body = await post(http, f"{matrix}/v1/matrix/search",
                                  {"query_text": "cats", "mode": mode, "corpora": [typo]})
        assert status == 404, body
        assert body["error"]["code"] == "corpus_not_found"
        assert f"corpus {typo!r} not found (did you mean {a!r}?)" in body["error"]["message"]


async def test_allow_partial_reports_failed_corpora(http: aiohttp.ClientSession, matrix: str,
                                                    two_corpora: tuple[str, str]) -> None:
    a, _ = two_corpora
    missing = unique("nope")
    status, body = await post(http, f"{matrix}/v1/matrix/search",
                              {"query_text": "cats", "mode": "vector", "corpora": [a, missing],
                               "allow_partial": True})
    assert status == 200, body
    assert {h["corpus"] for h in body["hits"]} == {a}
    assert [f["corpus"] for f in body["failed_corpora"]] == [missing]
    assert "not found" in body["failed_corpora"][0]["error"]


@pytest.mark.parametrize(("body", "field"), [
    ({"query_text": "x", "corpora": []}, "corpora"),
    ({"query_text": "x", "corpora": ["a"], "corpus_weights": {"b": 2}}, "corpus_weights.b"),
    ({"query_text": "x", "corpora": ["a"], "corpus_weights": {"a": 0}}, "corpus_weights.a"),
    ({"corpora": ["a"]}, "query_text"),
    ({"query_text": "   ", "corpora": ["a"]}, "query_text"),
    ({"query_text": "x", "corpora": ["Bad-Name;"]}, "corpora[0]"),
    ({"query_text": "x", "corpora": ["a", "a"]}, "corpora[1]"),
    ({"query_text": "x", "corpora": ["a"], "k": 0}, "k"),
    ({"query_text": "x", "corpora": ["a"], "k": 1001}, "k"),
    ({"query_text": "x", "corpora": ["a"], "mode": "fuzzy"}, "mode"),
    ({"query_vector": [0.1, 0.2], "corpora": ["a"], "mode": "lexical"}, "query_text"),
    ({"query_text": "x", "corpora": ["a"], "colour": "red"}, "colour"),
])
async def test_bad_search_requests(http: aiohttp.ClientSession, matrix: str,
                                   body: dict[str, Any], field: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/search", body)
    assert status == 400, out
    assert out["error"]["field"] == field


async def test_bad_filter_is_a_400_not_a_502(http: aiohttp.ClientSession, matrix: str,
                                             two_corpora: tuple[str, str]) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/search",
                             {"query_text": "cats", "mode": "vector", "corpora": list(two_corpora),
                              "filter": {"colour": "red"}})
    assert status == 400, out
    assert out["error"]["field"].startswith("filter")


async def test_embedd_down_vector_mode_is_503(http: aiohttp.ClientSession, base_cfg: Config,
                                              vectord_url: str,
                                              two_corpora: tuple[str, str]) -> None:
    server = await start_matrix(base_cfg, vectord_url, "http://127.0.0.1:1")
    try:
        status, out = await post(http, f"{url_of(server)}/v1/matrix/search",
                                 {"query_text": "cats", "mode": "vector",
                                  "corpora": list(two_corpora)})
        assert status == 503, out
        assert out["error"]["code"] == "embedd_unavailable"
        async with http.get(f"{url_of(server)}/readyz") as r:
            ready = await r.json()
            assert r.status == 200 and ready["status"] == "degraded"
            assert ready["components"]["vectord"] == "ok"
    finally:
        await server.close()


async def test_readyz(http: aiohttp.ClientSession, matrix: str) -> None:
    async with http.get(f"{matrix}/readyz") as r:
        assert r.status == 200
        assert await r.json() == {"status": "ok",
                                  "components": {"vectord": "ok", "embedd": "ok"}}


# ---- playbook -------------------------------------------------------------------------------

async def _search(http: aiohttp.ClientSession, matrix: str, body: dict[str, Any]) -> Any:
    status, out = await post(http, f"{matrix}/v1/matrix/search", body)
    assert status == 200, out
    return out


async def test_playbook_loop(http: aiohttp.ClientSession, matrix: str, counter: Counter,
                             two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    pb = unique("pb")
    q = {"query_text": "an animal that talks", "mode": "vector", "corpora": [a, b], "k": 10,
         "playbook_corpus": pb}
    base = await _search(http, matrix, q)
    ids = [(h["corpus"], h["id"]) for h in base["hits"]]
    target = ids[2]
    base_d = base["hits"][2]["distance"]

    status, rec = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                             {"query_text": q["query_text"], "answer_id": target[1],
                              "answer_corpus": target[0], "score": 1.0, "tags": ["good"],
                              "playbook_corpus": pb})
    assert status == 200, rec
    assert len(rec["playbook_id"]) == 64 and rec["created"] is True

    before = counter.calls
    boosted = await _search(http, matrix, {**q, "use_playbook": True})
    assert counter.calls == before + 1  # one embed call serves the search and the playbook
    assert boosted["playbook_boosted"] == 1
    new_ids = [(h["corpus"], h["id"]) for h in boosted["hits"]]
    hit = boosted["hits"][new_ids.index(target)]
    assert hit["distance"] == base_d * 0.5
    assert hit["original_distance"] == base_d
    assert hit["boost_factor"] == 0.5
    assert new_ids.index(target) < 2
    others = [h for h in boosted["hits"] if (h["corpus"], h["id"]) != target]
    assert all(h["boost_factor"] == 1.0 for h in others)
    distances = [h["distance"] for h in boosted["hits"]]
    assert distances == sorted(distances)

    # the same triple again replaces the entry: last score wins
    status, rec2 = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                              {"query_text": q["query_text"], "answer_id": target[1],
                               "answer_corpus": target[0], "score": 0.0, "playbook_corpus": pb})
    assert status == 200 and rec2["playbook_id"] == rec["playbook_id"] and not rec2["created"]
    again = await _search(http, matrix, {**q, "use_playbook": True})
    assert again["playbook_boosted"] == 0
    assert [(h["corpus"], h["id"]) for h in again["hits"]] == ids


async def test_playbook_attribution_is_per_corpus(http: aiohttp.ClientSession, matrix: str,
                                                  two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    pb = unique("pb")
    q = {"query_text": "stars and planets", "mode": "vector", "corpora": [a, b], "k": 10,
         "playbook_corpus": pb}
    status, _ = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                           {"query_text": q["query_text"], "answer_id": "d3",
                            "answer_corpus": a, "score": 1.0, "playbook_corpus": pb})
    assert status == 200
    out = await _search(http, matrix, {**q, "use_playbook": True})
    by_key = {(h["corpus"], h["id"]): h for h in out["hits"]}
    assert by_key[(a, "d3")]["boost_factor"] == 0.5
    assert by_key[(b, "d3")]["boost_factor"] == 1.0
    assert out["playbook_boosted"] == 1


async def test_missing_playbook_corpus_is_a_noop(http: aiohttp.ClientSession, matrix: str,
                                                 two_corpora: tuple[str, str]) -> None:
    out = await _search(http, matrix, {"query_text": "cats", "mode": "vector",
                                       "corpora": list(two_corpora), "use_playbook": True,
                                       "playbook_corpus": unique("never")})
    assert out["playbook_boosted"] == 0 and out["playbook"]["entries"] == 0


async def test_concurrent_first_records(http: aiohttp.ClientSession, matrix: str,
                                        two_corpora: tuple[str, str]) -> None:
    pb = unique("pb")
    results = await asyncio.gather(*[
        post(http, f"{matrix}/v1/matrix/playbooks/record",
             {"query_text": f"question {i}", "answer_id": f"d{i}", "answer_corpus": two_corpora[0],
              "score": 0.5, "playbook_corpus": pb}) for i in range(5)])
    assert [s for s, _ in results] == [200] * 5, results
    assert sum(1 for _, r in results if r["created"]) <= 1
    async with aiohttp.ClientSession() as s, s.get(f"{matrix}/v1/matrix/corpora") as r:
        corpora = {c["name"]: c for c in (await r.json())["corpora"]}
    assert corpora[pb]["count"] == 5


@pytest.mark.parametrize(("body", "field"), [
    ({"query_text": "q", "answer_id": "a", "answer_corpus": "docs", "score": 1.5}, "score"),
    ({"query_text": "q", "answer_id": "a", "answer_corpus": "docs", "score": -1.1}, "score"),
    ({"query_text": "q", "answer_id": "a", "answer_corpus": "docs"}, "score"),
    ({"query_text": " ", "answer_id": "a", "answer_corpus": "docs", "score": 1}, "query_text"),
    ({"query_text": "q", "answer_id": "a", "answer_corpus": "Docs!", "score": 1}, "answer_corpus"),
])
async def test_bad_records(http: aiohttp.ClientSession, matrix: str, body: dict[str, Any],
                           field: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record", body)
    assert status == 400, out
    assert out["error"]["field"] == field


# ---- relevance ------------------------------------------------------------------------------

FOCUS = {"path": "src/net/connector.rs",
         "text": "use crate::registry::Registry;\npub struct Connector { reg: Registry }\n"}
CHUNKS = [
    {"source": "src/net/dialer.rs", "text": "let c = Connector::new();"},
    {"source": "src/registry.rs", "text": "pub struct Registry { entries: Vec<u8> }"},
    {"doc_id": "weather-1", "text": "Rain tomorrow afternoon."},
]


async def test_relevance_endpoint(http: aiohttp.ClientSession, matrix: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/relevance",
                             {"focus": FOCUS, "chunks": CHUNKS})
    assert status == 200, out
    assert [c["index"] for c in out["kept"]] == [0]
    assert out["kept"][0]["score"] > 0
    dropped = {c["index"]: c for c in out["dropped"]}
    assert dropped[1]["score"] < 0 and dropped[1]["signals"]["import_penalty"] == -0.5
    assert dropped[2]["score"] == 0
    assert out["focus"]["defined_symbols"] == ["Connector"]
    assert out["focus"]["imported_symbols"] == ["Registry"]
    status, out = await post(http, f"{matrix}/v1/matrix/relevance",
                             {"focus": FOCUS, "chunks": CHUNKS, "threshold": 1.5})
    assert status == 200 and out["kept"] == []


@pytest.mark.parametrize(("body", "field"), [
    ({"focus": FOCUS, "chunks": []}, "chunks"),
    ({"focus": FOCUS, "chunks": [{"text": "x"}]}, "chunks[0].source"),
    ({"chunks": CHUNKS}, "focus"),
    ({"focus": {"path": ""}, "chunks": CHUNKS}, "focus.path"),
])
async def test_bad_relevance_requests(http: aiohttp.ClientSession, matrix: str,
                                      body: dict[str, Any], field: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/relevance", body)
    assert status == 400, out
    assert out["error"]["field"] == field


async def test_relevance_inside_search(http: aiohttp.ClientSession, matrix: str,
                                       vectord_url: str, embedd_url: str) -> None:
    name = unique("code")
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        texts = [c["text"] for c in CHUNKS]
        e = await emb.embed(texts)
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [{"id": f"c{i}", "vector": v, "text": t,
                                 "metadata": {"path": CHUNKS[i].get("source", "docs/w.md")}}
                                for i, (t, v) in enumerate(zip(texts, e.vectors, strict=True))])
        try:
            out = await _search(http, matrix, {
                "query_text": "connector registry", "mode": "vector", "corpora": [name],
                "relevance": {"focus": FOCUS}})
        finally:
            await vec.delete_corpus(name)
    assert [h["id"] for h in out["hits"]] == ["c0"]
    assert out["hits"][0]["relevance"]["score"] > 0
    assert {d["id"] for d in out["relevance"]["dropped"]} == {"c1", "c2"}


# ---- lexical and hybrid -------------------------------------------------------------------

async def test_hybrid_is_the_default_with_text(http: aiohttp.ClientSession, matrix: str,
                                               two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    out = await _search(http, matrix, {"query_text": "largest planet", "corpora": [a, b]})
    assert out["mode"] == "hybrid" and out["degraded"] == []
    assert (out["hits"][0]["corpus"], out["hits"][0]["id"]) == (b, "d1")
    scores = [h["merge_score"] for h in out["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert all(h["merge_score"] == h["score"] for h in out["hits"])


async def test_lexical_merges_by_union_bm25(http: aiohttp.ClientSession, matrix: str,
                                            two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    out = await _search(http, matrix, {"query_text": "largest", "mode": "lexical",
                                       "corpora": [a, b]})
    assert {(h["corpus"], h["id"]) for h in out["hits"]} == {(a, "d2"), (b, "d1")}
    # BM25 with the statistics of the union: one scale, so the merge is by score.
    assert all(h["merge_score"] == h["score"] > 0 and h["corpus_rank"] == 1
               for h in out["hits"])
    assert [h["score"] for h in out["hits"]] == sorted(
        (h["score"] for h in out["hits"]), reverse=True)


async def test_hybrid_degrades_to_lexical_when_embedd_down(
        http: aiohttp.ClientSession, base_cfg: Config, vectord_url: str,
        two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    server = await start_matrix(base_cfg, vectord_url, "http://127.0.0.1:1")
    try:
        status, out = await post(http, f"{url_of(server)}/v1/matrix/search",
                                 {"query_text": "largest", "corpora": [a, b],
                                  "use_playbook": True})
    finally:
        await server.close()
    assert status == 200, out
    assert out["requested_mode"] == "hybrid" and out["mode"] == "lexical"
    # the playbook is looked up by the question's words instead
    assert out["degraded"] == ["embedding_unavailable"]
    assert out["playbook"]["match"] == "lexical"
    assert {(h["corpus"], h["id"]) for h in out["hits"]} == {(a, "d2"), (b, "d1")}


async def test_playbook_boost_in_a_score_ranked_mode(http: aiohttp.ClientSession, matrix: str,
                                                     two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    pb = unique("pb")
    q = {"query_text": "largest", "mode": "lexical", "corpora": [a, b], "playbook_corpus": pb}
    base = await _search(http, matrix, q)
    last = base["hits"][-1]
    status, _ = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                           {"query_text": "largest", "answer_id": last["id"],
                            "answer_corpus": last["corpus"], "score": 1.0, "playbook_corpus": pb})
    assert status == 200
    out = await _search(http, matrix, {**q, "use_playbook": True})
    top = out["hits"][0]
    assert (top["corpus"], top["id"]) == (last["corpus"], last["id"])
    assert top["merge_score"] == last["merge_score"] / 0.5
    assert top["original_merge_score"] == last["merge_score"]
    assert out["playbook_boosted"] == 1


async def test_playbook_max_distance_per_request(http: aiohttp.ClientSession, matrix: str,
                                                 two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    pb = unique("pb")
    status, _ = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                           {"query_text": "talking birds", "answer_id": "d3",
                            "answer_corpus": a, "score": 1.0, "playbook_corpus": pb})
    assert status == 200
    q = {"query_text": "birds that talk", "mode": "vector", "corpora": [a, b],
         "use_playbook": True, "playbook_corpus": pb}
    near = await _search(http, matrix, {**q, "playbook_max_distance": 1.0})
    assert near["playbook"]["entries"] == 1 and near["playbook_boosted"] == 1
    strict = await _search(http, matrix, {**q, "playbook_max_distance": 0.0})
    assert strict["playbook"]["entries"] == 0 and strict["playbook_boosted"] == 0
    status, out = await post(http, f"{matrix}/v1/matrix/search", {**q, "playbook_top_k": 0})
    assert status == 400 and out["error"]["field"] == "playbook_top_k"


async def test_all_corpora_by_default_without_playbooks(http: aiohttp.ClientSession,
                                                       matrix: str,
                                                       two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    pb = unique("pb")
    status, _ = await post(http, f"{matrix}/v1/matrix/playbooks/record", {
        "query_text": "largest planet", "answer_id": "d1", "answer_corpus": b, "score": 1.0,
        "playbook_corpus": pb})
    assert status == 200
    out = await _search(http, matrix, {"query_text": "largest planet", "mode": "lexical",
                                       "k": 50, "playbook_corpus": pb})
    searched = {c["corpus"] for c in out["corpora"]}
    assert {a, b} <= searched and pb not in searched
    assert (b, "d1") in {(h["corpus"], h["id"]) for h in out["hits"]}
    assert all(h["corpus"] != pb for h in out["hits"])


async def test_corpus_weights_through_matrixd(http: aiohttp.ClientSession, matrix: str,
                                              two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    body = {"query_text": "largest", "mode": "lexical", "corpora": [a, b]}
    plain = await _search(http, matrix, body)
    for favoured in (a, b):
        out = await _search(http, matrix, {**body, "corpus_weights": {favoured: 100.0}})
        assert out["hits"][0]["corpus"] == favoured
        top = out["hits"][0]
        assert top["merge_score"] == pytest.approx(top["score"] * 100.0)
    assert len(plain["hits"]) == 2


async def test_questions_go_to_the_interactive_lane(http: aiohttp.ClientSession, matrix: str,
                                                    counter: Counter,
                                                    two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    before = len(counter.paths)
    await _search(http, matrix, {"query_text": "largest animal", "corpora": [a, b]})
    assert counter.paths[before:] == [INTERACTIVE_PATH]


@pytest.mark.parametrize("mode", ["keyword", "lexical"])
async def test_word_searches_never_embed(http: aiohttp.ClientSession, matrix: str,
                                         counter: Counter, two_corpora: tuple[str, str],
                                         mode: str) -> None:
    a, b = two_corpora
    before = counter.calls
    out = await _search(http, matrix, {"query_text": "largest", "mode": mode,
                                       "corpora": [a, b], "use_playbook": True})
    assert out["hits"] and out["playbook"]["match"] == "lexical"
    assert counter.calls == before


async def test_word_searches_with_feedback_while_embedd_is_stopped(
        http: aiohttp.ClientSession, base_cfg: Config, vectord_url: str, matrix: str,
        two_corpora: tuple[str, str]) -> None:
    a, b = two_corpora
    pb = unique("pb")
    q = {"query_text": "largest", "mode": "lexical", "corpora": [a, b], "playbook_corpus": pb}
    last = (await _search(http, matrix, q))["hits"][-1]
    status, _ = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                           {"query_text": "the largest", "answer_id": last["id"],
                            "answer_corpus": last["corpus"], "score": 1.0, "playbook_corpus": pb})
    assert status == 200
    server = await start_matrix(base_cfg, vectord_url, "http://127.0.0.1:1")  # no embedd
    try:
        for mode in ("keyword", "lexical"):
            status, out = await post(http, f"{url_of(server)}/v1/matrix/search",
                                     {**q, "mode": mode, "use_playbook": True,
                                      "playbook_max_distance": 0.5})
            assert status == 200, out
            assert out["degraded"] == [] and out["playbook"]["match"] == "lexical"
            # the recorded answer ("the largest" is near "largest" by its words) leads
            assert out["playbook"]["entries"] == 1
            assert (out["hits"][0]["corpus"], out["hits"][0]["id"]) == (last["corpus"], last["id"])
    finally:
        await server.close()


async def test_unknown_corpus_refused_before_embedding(http: aiohttp.ClientSession, matrix: str,
                                                       counter: Counter,
                                                       two_corpora: tuple[str, str]) -> None:
    a, _ = two_corpora
    before = counter.calls
    status, out = await post(http, f"{matrix}/v1/matrix/search",
                             {"query_text": "largest", "corpora": [a, unique("nosuch")]})
    assert status == 404 and out["error"]["code"] == "corpus_not_found", out
    assert out["error"]["field"] == "corpora"
    assert counter.calls == before
