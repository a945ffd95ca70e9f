"""The four query-intelligence routes through the real matrixd, vectord and embedd."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.server import make_app
from tests.helpers import serve, url_of, with_section

TURNS = [
    ("D1:1", "Caroline", "Hey Mel! How have you been?", "2023-05-08"),
    ("D1:2", "Melanie", "Swamped with the kids and work. What's new with you?", "2023-05-08"),
    ("D1:3", "Caroline", "I went to a LGBTQ support group yesterday and it was so powerful.", "2023-05-08"),
    ("D1:4", "Melanie", "I ran a charity race for mental health last Saturday.", "2023-05-08"),
    ("D2:1", "Caroline", "I am researching adoption agencies; I want to give a kid a home.", "2023-05-25"),
    ("D2:2", "Melanie", "My kids and I went camping at the national park last weekend.", "2023-05-25"),
    ("D2:3", "Caroline", "I moved from Sweden four years ago with my mom.", "2023-05-25"),
    ("D2:4", "Melanie", "Pottery is my favourite way to relax, besides painting sunsets.", "2023-05-25"),
    ("D2:5", "Caroline", "The config key max_batch_size broke the importer again.", "2023-05-25"),
]


@pytest.fixture(scope="module")
async def matrix(base_cfg: Config, vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    cfg = with_section(base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=embedd_url,
                       normalize_max_chars=500, playbook_corpus=f"pb_{uuid.uuid4().hex[:8]}")
    server = await serve(make_app(cfg))
    yield url_of(server)
    await server.close()


@pytest.fixture(scope="module")
async def talk(vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    name = f"talk_{uuid.uuid4().hex[:10]}"
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        texts = [f"{sp}: {t}" for _, sp, t, _ in TURNS]
        e = await emb.embed(texts)
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [
            {"id": i, "vector": v, "text": text, "title": f"session {i[1]}, {d}",
             "metadata": {"speaker": sp, "date": d, "session": int(i[1]),
                          "turn": int(i.split(":")[1])}}
            for (i, sp, _, d), text, v in zip(TURNS, texts, e.vectors, strict=True)], model=e.model)
        yield name
        await vec.delete_corpus(name)


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


async def test_analyze(http: aiohttp.ClientSession, matrix: str) -> None:
    st, out = await post(http, f"{matrix}/v1/matrix/analyze",
                         {"query_text": "What did Melanie do last week?", "now": "2023-05-08T12:00:00Z"})
    assert st == 200, out
    assert out["persons"] == ["Melanie"]
    assert out["temporal_range"] == {"start": "2023-05-01", "end": "2023-05-08",
                                     "relative": "last week"}
    assert out["question_type"] in ("factual", "temporal")
    assert set(out) >= {"query", "entities", "locations", "organizations", "complexity",
                        "confidence", "required_info_types", "sub_queries"}


@pytest.mark.parametrize(("body", "field"), [
    ({"query_text": "   "}, "query_text"),
    ({"query_text": ""}, "query_text"),
    ({"query_text": "When?", "now": "last tuesday"}, "now"),
])
async def test_analyze_bad_input(http: aiohttp.ClientSession, matrix: str, body: dict[str, Any],
                                 field: str) -> None:
    st, out = await post(http, f"{matrix}/v1/matrix/analyze", body)
    assert st == 400 and out["error"]["field"] == field, out


async def test_normalize_locomo_example(http: aiohttp.ClientSession, matrix: str) -> None:
    st, out = await post(http, f"{matrix}/v1/matrix/normalize", {"observations": [
        {"text": "I went to a LGBTQ support group yesterday", "speaker": "Caroline",
         "reference_time": "2023-05-08T13:56:00"}]})
    assert st == 200, out
    [o] = out["observations"]
    assert o["text"] == "Caroline went to a LGBTQ support group on 7 May 2023"
    assert o["original"] == "I went to a LGBTQ support group yesterday"
    assert {"span": "yesterday", "replacement": "on 7 May 2023", "kind": "temporal"} in o["resolved"]
    assert o["keywords"]


async def test_normalize_bad_input(http: aiohttp.ClientSession, matrix: str) -> None:
    url = f"{matrix}/v1/matrix/normalize"
    st, out = await post(http, url, {"observations": [{"text": "hi"}] * 1001})
    assert st == 413 and out["error"]["field"] == "observations"
    st, out = await post(http, url, {"observations": [{"text": "ok"}, {"text": "x" * 501}]})
    assert st == 413 and out["error"]["field"] == "observations[1].text"
    st, out = await post(http, url, {"observations": [{"text": "ok", "reference_time": "soon"}]})
    assert st == 400 and out["error"]["field"] == "observations[0].reference_time"


async def test_smart_search(http: aiohttp.ClientSession, matrix: str, talk: str) -> None:
    q = "What activities does Melanie do with her kids and what does she do to relax?"
    st, out = await post(http, f"{matrix}/v1/matrix/smart_search",
                         {"query_text": q, "corpora": [talk], "k": 5})
    assert st == 200, out
    assert out["mode"] == "smart" and len(out["hits"]) == 5
    ids = [h["id"] for h in out["hits"]]
    assert "D2:2" in ids and "D2:4" in ids
    plan = out["plan"]
    assert len(plan["sub_queries"]) >= 3 and plan["execution"] in ("parallel", "sequential")
    assert {q["layer"] for q in plan["sub_queries"]} <= {"hybrid", "lexical", "vector"}
    assert 1 <= len(out["iterations"]) <= 3
    assert out["iterations"][-1]["stopped"] in ("adequate", "max_iterations", "no_new_queries")
    assert out["iterations"][0]["queries"][0]["purpose"] == "original"


async def test_smart_search_judges_turns_with_their_neighbours(
        http: aiohttp.ClientSession, matrix: str, talk: str) -> None:
    url = f"{matrix}/v1/matrix/smart_search"
    body = {"query_text": "What does Melanie do to relax?", "corpora": [talk], "k": 9}
    st, on = await post(http, url, body)
    assert st == 200, on
    for h in on["hits"]:  # every hit has a session and a turn: each got its context score
        assert h["context_score"] >= h["score"] - 1e-9
    st, off = await post(http, url, {**body, "context": False})
    assert st == 200, off
    assert all("context_score" not in h for h in off["hits"])
    st, out = await post(http, url, {**body, "context": "yes"})
    assert st == 400 and out["error"]["field"] == "context", out


async def test_smart_search_stops_at_max_iterations(http: aiohttp.ClientSession, matrix: str,
                                                    talk: str) -> None:
    # A bar nothing reaches: reflection can never be satisfied, so the cap ends it.
    st, out = await post(http, f"{matrix}/v1/matrix/smart_search",
                         {"query_text": "Where did Caroline move from?", "corpora": [talk],
                          "max_iterations": 2, "min_confidence": 1.0})
    assert st == 200, out
    assert len(out["iterations"]) <= 2
    assert out["stopped"] in ("max_iterations", "no_new_queries")
    assert out["iterations"][0]["missing"]


@pytest.mark.parametrize(("body", "field"), [
    ({"query_text": " "}, "query_text"),
    ({"query_text": "x?", "max_iterations": 0}, "max_iterations"),
    ({"query_text": "x?", "max_iterations": 11}, "max_iterations"),
    ({"query_text": "x?", "now": "2023-13-45"}, "now"),
])
async def test_smart_search_bad_input(http: aiohttp.ClientSession, matrix: str, talk: str,
                                      body: dict[str, Any], field: str) -> None:
    st, out = await post(http, f"{matrix}/v1/matrix/smart_search", {**body, "corpora": [talk]})
    assert st == 400 and out["error"]["field"] == field, out


async def test_search_auto_hybrid_with_context(http: aiohttp.ClientSession, matrix: str,
                                               talk: str) -> None:
    url = f"{matrix}/v1/matrix/search_auto"
    body = {"query_text": "Which hobby relaxes Melanie?", "corpora": [talk],
            "k": 3}
    st, out = await post(http, url, body)
    assert st == 200 and out["strategy"] == "hybrid", out
    assert out["k"] == 3 and len(out["hits"]) == 3
    assert [h["rank"] for h in out["hits"]] == [1, 2, 3]
    assert all("context_score" in h for h in out["hits"])
    scores = [h["context_score"] for h in out["hits"]]
    assert scores == sorted(scores, reverse=True)
    st, out = await post(http, url, {**body, "context": False})
    assert st == 200 and out["strategy"] == "hybrid", out
    assert len(out["hits"]) == 3 and all("context_score" not in h for h in out["hits"])


async def test_search_auto(http: aiohttp.ClientSession, matrix: str, talk: str) -> None:
    url = f"{matrix}/v1/matrix/search_auto"
    st, out = await post(http, url, {"query_text": "max_batch_size", "corpora": [talk]})
    assert st == 200, out
    assert out["strategy"] == "keyword" and out["hits"][0]["id"] == "D2:5"
    st, out = await post(http, url, {"query_text": "When did Caroline go to the support group?",
                                     "corpora": [talk]})
    assert st == 200 and out["strategy"] == "smart", out
    assert "D1:3" in [h["id"] for h in out["hits"][:3]]
    assert out["estimated_ms"] > 0 and out["took_ms"] > 0 and out["reason"]
    # After a smart search was measured, a budget below its cost picks a cheaper strategy.
    st, out = await post(http, url, {"query_text": "When did Caroline go to the support group?",
                                     "corpora": [talk], "budget_ms": 0.001})
    assert st == 200 and out["strategy"] != "smart" and "budget" in out["reason"], out


@pytest.mark.parametrize(("body", "field"), [
    ({"query_text": ""}, "query_text"),
    ({"query_text": "x", "budget_ms": 0}, "budget_ms"),
    ({"query_text": "x", "budget_ms": -5}, "budget_ms"),
])
async def test_search_auto_bad_input(http: aiohttp.ClientSession, matrix: str, talk: str,
                                     body: dict[str, Any], field: str) -> None:
    st, out = await post(http, f"{matrix}/v1/matrix/search_auto", {**body, "corpora": [talk]})
    assert st == 400 and out["error"]["field"] == field, out


async def test_smart_search_date_preference(http: aiohttp.ClientSession, matrix: str,
                                            talk: str) -> None:
    # A question bounded in time prefers items whose metadata date falls in the range.
    st, out = await post(http, f"{matrix}/v1/matrix/smart_search",
                         {"query_text": "What did Melanie do in the week of 22 May 2023?",
                          "corpora": [talk], "k": 3, "now": "2023-06-01T00:00:00Z"})
    assert st == 200, out
    assert out["plan"]["date_preference"]["field"] == "date"
    assert all(h["metadata"]["date"] == "2023-05-25" for h in out["hits"][:2]), out["hits"]
