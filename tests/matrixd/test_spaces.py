"""Corpora of several embedding models in one search: each space searched with its own
query vector, a corpus no model serves searched lexically and reported, never a 502.

Real vectord (embedded PostgreSQL) and the real local model; the second model is served
by embedd's Ollama backend against a fake speaking Ollama's wire format (no Ollama here).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.config import Config
from internal.embedd.server import make_app as make_embedd
from internal.matrixd.server import make_app as make_matrixd
from tests.embedd.test_remote import Fake
from tests.helpers import serve, url_of, with_section

# Words no other test's corpus holds, so this module's corpora answer its queries first.
LOCAL = ["Zorblatt ferries carry quokkas across the Vintermere lagoon.",
         "The Vintermere lagoon freezes in the month of Snowtide.",
         "Quokkas of the lagoon eat kelp and sleep in dunes."]
OTHER = ["Zorblatt ferry timetables change when the Vintermere lagoon floods.",
         "Kelp harvesting on the lagoon shore starts at dawn."]
TINY = ["A Zorblatt ferry token costs three shells at the Vintermere pier."]


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def call(http: aiohttp.ClientSession, method: str, url: str,
               body: Any = None) -> tuple[int, Any]:
    async with http.request(method, url, json=body) as r:
        return r.status, await r.json()


async def fill(http: aiohttp.ClientSession, vectord: str, embedd: str, name: str,
               texts: list[str], model: str | None) -> None:
    """A corpus embedded by model (None: three-dimensional vectors given by hand)."""
    if model is None:
        vectors = [[1.0, float(i), 0.5] for i in range(len(texts))]
        dim, label = 3, None
    else:
        status, e = await call(http, "POST", f"{embedd}/v1/embed",
                               {"texts": texts, "model": model})
        assert status == 200, e
        vectors, dim, label = e["vectors"], e["dim"], e["model"]
    status, out = await call(http, "POST", f"{vectord}/v1/vectors/corpora",
                             {"name": name, "dim": dim})
    assert status == 201, out
    status, out = await call(http, "POST", f"{vectord}/v1/vectors/corpora/{name}/items", {
        "items": [{"id": f"d{i}", "vector": v, "text": t} for i, (t, v) in
                  enumerate(zip(texts, vectors, strict=True))], "model": label})
    assert status == 200, out


class Stack:
    def __init__(self, fake: Fake, matrixd: str, corpora: dict[str, str]) -> None:
        self.fake, self.matrixd, self.corpora = fake, matrixd, corpora


@pytest.fixture(scope="module")
async def stack(base_cfg: Config, vectord_url: str) -> AsyncIterator[Stack]:
    fake = Fake(768)
    fake_srv = await serve(fake.app())
    embedd = await serve(make_embedd(with_section(
        base_cfg, "embedd", backends=("ollama",), ollama_host=url_of(fake_srv),
        timeout_seconds=2.0)))
    matrixd = await serve(make_matrixd(with_section(
        base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=url_of(embedd),
        playbook_corpus=unique("pb"))))
    corpora = {"local": unique("sp_local"), "other": unique("sp_other"),
               "tiny": unique("sp_tiny")}
    async with aiohttp.ClientSession() as http:
        await fill(http, vectord_url, url_of(embedd), corpora["local"], LOCAL, "local")
        await fill(http, vectord_url, url_of(embedd), corpora["other"], OTHER, "nomic-embed-text")
        await fill(http, vectord_url, url_of(embedd), corpora["tiny"], TINY, None)
        yield Stack(fake, url_of(matrixd), corpora)
        for name in corpora.values():
            await call(http, "DELETE", f"{vectord_url}/v1/vectors/corpora/{name}")
    await matrixd.close()
    await embedd.close()
    fake.release.set()
    await fake_srv.close()


def mine(stack: Stack, body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """This module's hits and skipped corpora (the session's database holds others)."""
    names = set(stack.corpora.values())
    return {"hits": [h for h in body["hits"] if h["corpus"] in names],
            "skipped": [s for s in body["skipped_corpora"] if s["corpus"] in names]}


async def search(http: aiohttp.ClientSession, stack: Stack, **body: Any) -> tuple[int, Any]:
    body.setdefault("query_text", "Zorblatt ferry on the Vintermere lagoon")
    # k at its most: a fan-out over the session's database ranks every test's corpora, and
    # which of them a resource selection weighs up depends on what other tests left there.
    return await call(http, "POST", f"{stack.matrixd}/v1/matrix/search", {"k": 1000, **body})


async def test_every_space_answers_and_the_tiny_corpus_is_searched_lexically(
        http: aiohttp.ClientSession, stack: Stack) -> None:
    stack.fake.mode = "ok"
    status, body = await search(http, stack)
    assert status == 200, body
    got = mine(stack, body)
    by_corpus = {h["corpus"] for h in got["hits"]}
    assert by_corpus == set(stack.corpora.values())
    assert got["skipped"] == [{"corpus": stack.corpora["tiny"], "searched": "lexical",
                               "reason": got["skipped"][0]["reason"]}]
    assert "dimension 3" in got["skipped"][0]["reason"]
    # The second model's corpus was searched with its own query vector.
    assert any(r["input"] == ["search_query: Zorblatt ferry on the Vintermere lagoon"]
               for r in stack.fake.requests), (stack.fake.requests, body["skipped_corpora"])
    # Among this module's corpora alone (other tests' corpora of the same model may hold
    # nearer vectors), each space's hits carry their vector score; the tiny one's none.
    status, body = await search(http, stack, corpora=list(stack.corpora.values()),
                                allow_partial=True)
    assert status == 200, body
    other = [h for h in body["hits"] if h["corpus"] == stack.corpora["other"]]
    assert other and all(h["scores"].get("vector") is not None for h in other)
    local = [h for h in body["hits"] if h["corpus"] == stack.corpora["local"]]
    assert local and all(h["scores"].get("vector") is not None for h in local)
    tiny = [h for h in body["hits"] if h["corpus"] == stack.corpora["tiny"]]
    assert tiny and all(h["scores"].get("vector") is None for h in tiny)
    assert [s["corpus"] for s in body["skipped_corpora"]] == [stack.corpora["tiny"]]


async def test_vector_mode_over_every_space(http: aiohttp.ClientSession, stack: Stack) -> None:
    stack.fake.mode = "ok"
    status, body = await search(http, stack, mode="vector")
    assert status == 200, body
    got = mine(stack, body)
    assert [(s["corpus"], s["searched"]) for s in got["skipped"]] == [
        (stack.corpora["tiny"], "none")]
    status, body = await search(http, stack, mode="vector", allow_partial=True,
                                corpora=list(stack.corpora.values()))
    assert status == 200, body
    got = mine(stack, body)
    assert {h["corpus"] for h in got["hits"]} == {stack.corpora["local"], stack.corpora["other"]}
    assert [(s["corpus"], s["searched"]) for s in got["skipped"]] == [
        (stack.corpora["tiny"], "none")]


async def test_a_failing_model_is_reported_not_a_502(http: aiohttp.ClientSession,
                                                    stack: Stack) -> None:
    stack.fake.mode = "error"
    text = "Vintermere lagoon ferry for Zorblatt"  # not in embedd's cache yet
    try:
        status, body = await search(http, stack, query_text=text)
        assert status == 200, body
        got = mine(stack, body)
        reasons = {s["corpus"]: s for s in got["skipped"]}
        assert set(reasons) == {stack.corpora["other"], stack.corpora["tiny"]}
        assert "nomic-embed-text" in reasons[stack.corpora["other"]]["reason"]
        assert reasons[stack.corpora["other"]]["searched"] == "lexical"
        # Its documents still answer through the lexical branch.
        assert stack.corpora["other"] in {h["corpus"] for h in got["hits"]}

        # Named explicitly: the caller's ask fails loudly unless allow_partial.
        status, body = await search(http, stack, query_text=text,
                                    corpora=[stack.corpora["other"]])
        assert status == 502, body
        assert "nomic-embed-text" in body["error"]["message"]
        status, body = await search(http, stack, query_text=text,
                                    corpora=[stack.corpora["other"]], allow_partial=True)
        assert status == 200, body
        assert [s["corpus"] for s in body["skipped_corpora"]] == [stack.corpora["other"]]
        assert body["hits"]
    finally:
        stack.fake.mode = "ok"


async def test_spaces_route_groups_corpora_by_model(http: aiohttp.ClientSession,
                                                   vectord_url: str, stack: Stack) -> None:
    status, body = await call(http, "GET", f"{vectord_url}/v1/vectors/spaces")
    assert status == 200, body
    where = {c: (s["model"], s["dim"]) for s in body["spaces"] for c in s["corpora"]}
    assert where[stack.corpora["other"]] == ("nomic-embed-text", 768)
    assert where[stack.corpora["tiny"]] == (None, 3)
    assert where[stack.corpora["local"]][1] == 384
