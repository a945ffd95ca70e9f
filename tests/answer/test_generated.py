"""Answers written by a model, against fakes of Ollama and an OpenAI-compatible server in
their real wire formats (tests/answer/chat_fakes.py): the prompt, the markers checked, the
stream, the fallback to the extractive answer on a failure or a time-out."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest

from tests.answer.chat_fakes import ChatFake
from tests.answer.conftest import Corpora, MatrixFor
from tests.answer.test_route import PAPER_JAM, check_citations, post, stream

BACKENDS = ("ollama", "openai")


def config(backend: str, url: str, **more: Any) -> dict[str, Any]:
    # An OpenAI-compatible server is given its base URL with its path, as the SDK takes it.
    return {"backend": backend, "url": url + ("/v1" if backend == "openai" else ""),
            "model": "fake-model", **more}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_model_writes_from_the_question_and_numbered_passages_only(
        backend: str, http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora,
        chat: tuple[ChatFake, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, url = chat
    monkeypatch.setenv("FAKE_CHAT_KEY", "sk-test")
    matrix = await matrix_for(**config(backend, url, api_key_env="FAKE_CHAT_KEY",
                                       max_tokens=77))
    fake.reply = "Open the front door and pull the green lever [1]. Check the tape [2][17]."
    st, out = await post(http, f"{matrix}/v1/matrix/answer",
                         {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]})
    assert st == 200, out
    [sent] = fake.requests
    assert sent["model"] == "fake-model" and sent["stream"] is True
    assert (sent["options"]["num_predict"] if backend == "ollama" else sent["max_tokens"]) == 77
    system, user = sent["messages"]
    assert system["role"] == "system" and "only the numbered passages" in system["content"]
    assert user["role"] == "user" and user["content"].startswith(f"Question: {PAPER_JAM}\n")
    numbered = re.findall(r"^\[(\d+)\] (?:\(([^)]*)\) )?(.*)$", user["content"], re.M)
    assert [int(n) for n, _, _ in numbered] == list(range(1, len(numbered) + 1))
    # Nothing else in the prompt: the question, the passages (each with its item's title).
    assert len(user["content"].splitlines()) == 3 + len(numbered)
    stored = set(corpora.texts.values())
    assert all(any(" ".join(p.split()) in " ".join(t.split()) for t in stored)
               for _, _, p in numbered)
    # The bearer key from the environment goes to the OpenAI-compatible server only; the
    # stack's own headers never.
    if backend == "openai":
        assert fake.headers[0]["Authorization"] == "Bearer sk-test"
    assert out["text"] == ("Open the front door and pull the green lever [1]. "
                           "Check the tape [2].")
    assert out["generator"] == {"kind": backend, "model": "fake-model", "fallback": None,
                                "dropped_markers": 1}
    assert [c["marker"] for c in out["citations"]] == [1, 2]
    check_citations(corpora, out)
    assert out["timings"]["generate_ms"] > 0


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_stream_carries_the_models_checked_text(
        backend: str, http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora,
        chat: tuple[ChatFake, str]) -> None:
    fake, url = chat
    matrix = await matrix_for(**config(backend, url))
    fake.reply = "Pull the green lever [1][12] and check the orange tape [2]."
    _, events = await stream(http, f"{matrix}/v1/matrix/answer",
                             {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]})
    first, done = events[0][1], events[-1][1]["answer"]
    assert events[0][0] == "citations" and first["generator"]["kind"] == backend
    # The citations event numbers every passage given to the model; the answer keeps those
    # it cites.
    assert len(first["citations"]) >= 2 and [c["marker"] for c in done["citations"]] == [1, 2]
    assert done["citations"] == first["citations"][:2]
    text = "".join(d["text"] for e, d in events if e == "delta")
    assert text == done["text"] == "Pull the green lever [1] and check the orange tape [2]."
    assert done["generator"]["dropped_markers"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["error", "slow_first", "stall", "broken"])
async def test_a_failing_model_falls_back_to_the_extractive_answer(
        backend: str, mode: str, http: aiohttp.ClientSession, matrix_for: MatrixFor,
        corpora: Corpora, chat: tuple[ChatFake, str]) -> None:
    fake, url = chat
    fake.mode, fake.delay = mode, 3.0
    matrix = await matrix_for(**config(backend, url, first_token_seconds=0.5,
                                       timeout_seconds=1.5))
    body = {"query_text": PAPER_JAM, "corpora": [corpora.handbook, corpora.tickets]}
    _, extractive = await post(http, f"{matrix}/v1/matrix/answer",
                               {**body, "generator": "extractive"})
    st, out = await post(http, f"{matrix}/v1/matrix/answer", body)
    assert st == 200, out
    g = out["generator"]
    assert g["kind"] == backend and g["fallback"], g
    if mode in ("slow_first", "stall"):
        assert "within" in g["fallback"]
    assert "generator_unavailable" in out["degraded"]
    assert out["text"] == extractive["text"] and out["citations"] == extractive["citations"]
    _, events = await stream(http, f"{matrix}/v1/matrix/answer", body)
    names = [e for e, _ in events]
    assert "reset" in names and names[-1] == "done"
    after = names.index("reset")
    reset = events[after][1]
    assert reset["citations"] == extractive["citations"]
    text = "".join(d["text"] for e, d in events[after:] if e == "delta")
    assert text == extractive["text"] == events[-1][1]["answer"]["text"]


async def test_a_request_may_choose_the_extractive_answer(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora,
        chat: tuple[ChatFake, str]) -> None:
    fake, url = chat
    matrix = await matrix_for(**config("ollama", url))
    st, out = await post(http, f"{matrix}/v1/matrix/answer",
                         {"query_text": PAPER_JAM, "corpora": [corpora.handbook],
                          "generator": "extractive"})
    assert st == 200 and out["generator"]["kind"] == "extractive" and fake.requests == []


async def test_a_refusal_never_asks_the_model(
        http: aiohttp.ClientSession, matrix_for: MatrixFor, corpora: Corpora,
        chat: tuple[ChatFake, str]) -> None:
    fake, url = chat
    matrix = await matrix_for(**config("openai", url))
    st, out = await post(http, f"{matrix}/v1/matrix/answer",
                         {"query_text": "Which river flows through Ulaanbaatar?",
                          "corpora": [corpora.handbook]})
    assert st == 200 and out["answered"] is False and fake.requests == []
