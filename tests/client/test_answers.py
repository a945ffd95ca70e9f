"""Answers through the Python client (sync, async, streamed) and the LangChain and
LlamaIndex integrations, on the live stack (tests/client/conftest.py: the tour's handbook
and tickets; no model configured, so every answer is extractive)."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.documents import Document
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)

import lakehouse
from lakehouse.integrations.langchain import LakehouseAnswer
from lakehouse.integrations.llamaindex import LakehouseQueryEngine
from lakehouse.wire.answer import AnswerResponse, DeltaEvent, DoneEvent, SourcesEvent
from tests.client.conftest import Live
from tests.client.test_cli_items import lakehouse_cli

QUESTION = "What do I do when the printer says paper jam?"
CORPORA = ["handbook", "tickets"]


def check(answer: AnswerResponse) -> None:
    assert answer.answered and answer.reason is None
    assert answer.generator.kind == "extractive"
    assert "green lever" in answer.text or "sealing tape" in answer.text
    hits = {(h.corpus, h.id): h for h in answer.hits}
    for c in answer.citations:
        assert f"[{c.marker}]" in answer.text
        assert hits[(c.corpus, c.id)].text[c.start:c.end] == c.passage


def test_answer_sync(client: lakehouse.Client) -> None:
    out = client.answer(QUESTION, corpora=CORPORA, max_words=40)
    check(out)
    assert sum(len(c.passage.split()) for c in out.citations) <= 40


async def test_answer_async_with_search_options(aclient: lakehouse.AsyncClient) -> None:
    out = await aclient.answer(QUESTION, corpora=CORPORA, filter={"tags_any": ["printer"]},
                               prefer={"tags_any": ["printer"]}, k=4)
    check(out)
    assert all("printer" in h.tags for h in out.hits)


def test_answer_stream_sync(client: lakehouse.Client) -> None:
    events = list(client.answer_stream(QUESTION, corpora=CORPORA))
    assert isinstance(events[0], SourcesEvent) and isinstance(events[-1], DoneEvent)
    text = "".join(e.text for e in events if isinstance(e, DeltaEvent))
    done = events[-1].answer
    assert text == done.text and events[0].citations == done.citations
    check(done)


async def test_answer_stream_async_and_feedback(aclient: lakehouse.AsyncClient) -> None:
    events = [e async for e in aclient.answer_stream(QUESTION, corpora=CORPORA)]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    # A playbook of its own: the shared stack's default playbook is another test's to create.
    recorded = await aclient.record_answer(done, QUESTION, 1.0, playbook_corpus="playbook_answers")
    assert len(recorded.recorded) == len({(c.corpus, c.id) for c in done.answer.citations})
    entries = (await aclient.playbooks(playbook_corpus="playbook_answers")).entries
    assert {(c.corpus, c.id) for c in done.answer.citations} <= {
        (e.answer_corpus, e.answer_id) for e in entries if e.query_text == QUESTION}


def test_answer_errors_raise_their_class(client: lakehouse.Client) -> None:
    with pytest.raises(lakehouse.InvalidArgument) as bad:
        client.answer(QUESTION, generator="model")  # no model is configured here
    assert bad.value.field == "generator"
    with pytest.raises(lakehouse.NotFound):
        next(client.answer_stream(QUESTION, corpora=["handbok"]))


def test_langchain_answer(client: lakehouse.Client) -> None:
    chain = LakehouseAnswer(client=client, corpora=CORPORA, answer_kwargs={"max_words": 50})
    out = chain.invoke(QUESTION)
    assert out["input"] == QUESTION and out["answered"] is True
    assert out["context"] and all(isinstance(d, Document) for d in out["context"])
    first = out["context"][0]
    assert first.metadata["marker"] == 1 and first.metadata["passage"] in first.page_content
    assert f"{first.metadata['passage'].split()[0]}" in out["answer"]
    chunks = list(chain.stream(QUESTION))
    assert "".join(c.get("answer", "") for c in chunks) == out["answer"]
    assert next(c for c in chunks if "context" in c)["context"] == out["context"]


async def test_langchain_answer_async(client: lakehouse.Client) -> None:
    chain = LakehouseAnswer(client=client, corpora=CORPORA)
    out = await chain.ainvoke(QUESTION)
    chunks = [c async for c in chain.astream(QUESTION)]
    assert "".join(c.get("answer", "") for c in chunks) == out["answer"]


def test_llamaindex_query_engine(client: lakehouse.Client) -> None:
    engine = LakehouseQueryEngine(client, corpora=CORPORA)
    out = engine.query(QUESTION)
    assert isinstance(out, Response) and out.metadata and out.metadata["answered"] is True
    assert out.source_nodes and out.source_nodes[0].node.metadata["marker"] == 1
    streamed = LakehouseQueryEngine(client, corpora=CORPORA, streaming=True).query(QUESTION)
    assert isinstance(streamed, StreamingResponse)
    assert "".join(streamed.response_gen) == out.response
    assert {n.node.node_id for n in out.source_nodes} <= {
        n.node.node_id for n in streamed.source_nodes}


async def test_llamaindex_query_engine_async(client: lakehouse.Client) -> None:
    out = await LakehouseQueryEngine(client, corpora=CORPORA).aquery(QUESTION)
    assert isinstance(out, Response)
    streamed = await LakehouseQueryEngine(client, corpora=CORPORA, streaming=True).aquery(QUESTION)
    assert isinstance(streamed, AsyncStreamingResponse)
    assert "".join([t async for t in streamed.response_gen]) == out.response


def test_lakehouse_answer_streams_the_text_then_its_sources(live: Live) -> None:
    out = lakehouse_cli(live, "answer", QUESTION, "--corpora", "handbook,tickets",
                        "--max-words", "40")
    assert out.returncode == 0, out.stderr
    text, _, tail = out.stdout.partition("\nsources\n")
    assert "[1]" in text and ("green lever" in text or "sealing tape" in text)
    assert re.search(r"^  \[1\] (handbook|tickets)/\S+ — ", tail, re.M), tail
    assert "(extractive; " in tail
    as_json = lakehouse_cli(live, "answer", QUESTION, "--corpora", "handbook", "--json")
    body = json.loads(as_json.stdout)
    assert body["answered"] and body["citations"][0]["corpus"] == "handbook"
    refused = lakehouse_cli(live, "answer", "Which river flows through Ulaanbaatar?",
                            "--corpora", "handbook")
    assert refused.returncode == 0 and "no answer (not_relevant); the nearest hits:" in refused.stdout
    missing = lakehouse_cli(live, "answer", QUESTION, "--corpora", "handbok")
    assert missing.returncode == 1 and "corpus 'handbok' not found" in missing.stderr
