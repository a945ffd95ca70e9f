"""POST /v1/matrix/answer through the real matrixd, vectord and embedd (the local model):
the extractive answer and its citations, refusals, the stream, bad input, feedback."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.answer.conftest import Corpora, MatrixFor

PAPER_JAM = "What do I do when the printer says paper jam?"


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


async def stream(http: aiohttp.ClientSession, url: str, body: Any
                 ) -> tuple[str, list[tuple[str, Any]]]:
    """The content type and the events (name, JSON) of a streamed answer; the last data
    line must be [DONE]."""
    async with http.post(url, json={**body, "stream": True}) as r:
        assert r.status == 200, await r.text()
        raw = (await r.read()).decode()
        ctype = r.headers["Content-Type"]
    frames = [f for f in raw.split("\n\n") if f.strip()]
    assert frames[-1] == "data: [DONE]"
    out = []
    for f in frames[:-1]:
        lines = dict(line.split(": ", 1) for line in f.split("\n"))
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        out.append((lines["event"], data))
    return ctype, out


def check_citations(corpora: Corpora, answer: dict[str, Any]) -> None:
    """Every citation's passage is its item's text at its offsets, its hit is among the
    answer's hits, and its marker is in the text."""
    hits = {(h["corpus"], h["id"]): h for h in answer["hits"]}
    for c in answer["citations"]:
        text = corpora.texts[(c["corpus"], c["id"])]
        assert text[c["start"]:c["end"]] == c["passage"], c
        assert (c["corpus"], c["id"]) in hits and hits[(c["corpus"], c["id"])]["rank"] == c["rank"]
        assert f"[{c['marker']}]" in answer["text"]


async def test_an_extractive_answer_cites_the_sentences_that_answer(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora) -> None:
    url = await matrix_for()
    st, out = await post(http, f"{url}/v1/matrix/answer",
                         {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]})
    assert st == 200, out
    assert out["answered"] is True and out["reason"] is None
    assert out["generator"] == {"kind": "extractive", "model": None, "fallback": None,
                                "dropped_markers": 0}
    assert "pull the green lever" in out["text"] and out["text"].count("[1]") == 1
    assert out["citations"][0]["id"] in ("printer-jam", "T-1042")
    check_citations(corpora, out)
    assert len(out["text"].split()) <= 60 + len(out["citations"])  # the budget, markers aside
    assert out["mode"] == "hybrid" and out["hits"] and out["degraded"] == []
    t = out["timings"]
    assert t["search_ms"] > 0 and t["total_ms"] >= t["search_ms"] and t["generate_ms"] is None
    # The same question answers the same way (no model, no randomness).
    st, again = await post(http, f"{url}/v1/matrix/answer",
                           {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]})
    assert again["text"] == out["text"] and again["citations"] == out["citations"]


async def test_the_word_budget_holds(http: aiohttp.ClientSession, matrix_for: MatrixFor,
                                     corpora: Corpora) -> None:
    url = await matrix_for()
    for budget in (5, 12, 40):
        st, out = await post(http, f"{url}/v1/matrix/answer",
                             {"query_text": PAPER_JAM, "corpora": [corpora.handbook],
                              "max_words": budget})
        assert st == 200, out
        words = sum(len(c["passage"].split()) for c in out["citations"])
        assert 0 < words <= budget, (budget, out["text"])
        check_citations(corpora, out)


async def test_nothing_relevant_is_refused_with_the_nearest_hits(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora) -> None:
    url = await matrix_for()
    st, out = await post(http, f"{url}/v1/matrix/answer",
                         {"query_text": "Which river flows through the capital of Mongolia?",
                          "corpora": [corpora.handbook, corpora.tickets]})
    assert st == 200, out
    assert out["answered"] is False and out["reason"] == "not_relevant", out["signals"]
    assert out["citations"] == [] and out["hits"], "the nearest hits come with a refusal"
    assert "hold nothing" in out["text"]


async def test_a_premise_no_hit_states_is_refused(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora) -> None:
    url = await matrix_for()
    body = {"corpora": [corpora.talk], "k": 5}
    # Melanie went camping; the question credits Caroline with it.
    st, out = await post(http, f"{url}/v1/matrix/answer",
                         {**body, "query_text": "Where did Caroline go camping with her kids?"})
    assert st == 200, out
    assert out["answered"] is False and out["reason"] == "unsupported_premise", out["signals"]
    assert out["signals"]["persons"] == ["Caroline"]
    st, out = await post(http, f"{url}/v1/matrix/answer",
                         {**body, "query_text": "Where did Melanie go camping with her kids?"})
    assert out["answered"] is True, out["signals"]
    assert out["citations"][0]["id"] == "D2:2" and "national park" in out["text"]


async def test_the_stream_sends_the_citations_first_then_the_text(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora) -> None:
    url = await matrix_for()
    body = {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]}
    ctype, events = await stream(http, f"{url}/v1/matrix/answer", body)
    assert ctype.startswith("text/event-stream")
    names = [e for e, _ in events]
    assert names[0] == "citations" and names[-1] == "done" and set(names[1:-1]) == {"delta"}
    first, done = events[0][1], events[-1][1]["answer"]
    assert first["answered"] and first["citations"] == done["citations"]
    assert [h["id"] for h in first["hits"]] == [h["id"] for h in done["hits"]]
    assert "".join(d["text"] for e, d in events if e == "delta") == done["text"]
    _, plain = await post(http, f"{url}/v1/matrix/answer", body)
    assert plain["text"] == done["text"]


async def test_a_refusal_streams_too(http: aiohttp.ClientSession, matrix_for: MatrixFor,
                                     corpora: Corpora) -> None:
    url = await matrix_for()
    _, events = await stream(http, f"{url}/v1/matrix/answer",
                             {"query_text": "Which river flows through Ulaanbaatar?",
                              "corpora": [corpora.handbook]})
    assert events[0][1]["answered"] is False and events[0][1]["citations"] == []
    assert events[-1][1]["answer"]["reason"] == "not_relevant"


async def test_bad_input_is_a_400_naming_the_field(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora) -> None:
    url = await matrix_for()
    for body, field in (({"query_text": "  "}, "query_text"),
                        ({"corpora": [corpora.handbook]}, "query_text"),
                        ({"query_text": "x", "max_words": 2}, "max_words"),
                        ({"query_text": "x", "generator": "poet"}, "generator"),
                        ({"query_text": "x", "generator": "model"}, "generator"),
                        ({"query_text": "x", "k": 0}, "k")):
        st, out = await post(http, f"{url}/v1/matrix/answer", body)
        assert st == 400 and out["error"]["field"] == field, (body, out)
    st, out = await post(http, f"{url}/v1/matrix/answer",
                         {"query_text": "x", "corpora": ["no_such_corpus"], "stream": True})
    assert st == 404 and out["error"]["code"] == "corpus_not_found"


async def test_feedback_on_an_answer_records_its_cited_hits(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora) -> None:
    url = await matrix_for()
    _, out = await post(http, f"{url}/v1/matrix/answer",
                        {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]})
    cited = [{"corpus": c["corpus"], "id": c["id"]} for c in out["citations"]]
    st, rec = await post(http, f"{url}/v1/matrix/answer/feedback",
                         {"query_text": PAPER_JAM, "cited": cited, "score": 1})
    assert st == 200, rec
    assert len(rec["recorded"]) == len({(c["corpus"], c["id"]) for c in cited})
    async with http.get(f"{url}/v1/matrix/playbooks") as r:
        entries = (await r.json())["entries"]
    assert {(e["answer_corpus"], e["answer_id"]) for e in entries} == {
        (c["corpus"], c["id"]) for c in cited}
    assert {e["score"] for e in entries} == {1.0}
    st, bad = await post(http, f"{url}/v1/matrix/answer/feedback",
                         {"query_text": PAPER_JAM, "cited": [], "score": 1})
    assert st == 400 and bad["error"]["field"] == "cited"
    # An item that does not exist: a 404 naming it, and nothing recorded.
    st, bad = await post(http, f"{url}/v1/matrix/answer/feedback",
                         {"query_text": "another question", "score": -1,
                          "cited": [*cited, {"corpus": corpora.handbook, "id": "nope"}]})
    assert st == 404 and bad["error"]["field"] == f"cited[{len(cited)}].id", bad
    async with http.get(f"{url}/v1/matrix/playbooks") as r:
        assert len((await r.json())["entries"]) == len(entries)
