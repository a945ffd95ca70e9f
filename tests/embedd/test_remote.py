"""The ollama and openai backends against small local servers speaking their wire format.

Neither Ollama nor an OpenAI-compatible server can run here, so each test starts a
fake that answers exactly as the real API does (request shape, answer shape, errors).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from internal.api.embedd import INTERACTIVE_PATH, LANE_HEADER
from internal.config import Config
from internal.embedd.backends import openai_embeddings_url
from internal.embedd.server import make_app
from tests.helpers import serve, url_of, with_section


def fake_vector(text: str, dim: int) -> list[float]:
    """Deterministic, not normalised (embedd must normalise)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).normal(0, 3, dim)]


class Fake:
    """One upstream: records what it was sent, answers per `mode`."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.mode = "ok"  # ok | error | slow | wrong_dim
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.release = asyncio.Event()

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self.mode == "slow":
            await asyncio.wait_for(self.release.wait(), 5)
        return body

    def _dim(self) -> int:
        return self.dim + 1 if self.mode == "wrong_dim" else self.dim

    async def ollama_embed(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if self.mode == "error":
            return web.json_response(
                {"error": f'model "{body["model"]}" not found, try pulling it first'}, status=404)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return web.json_response({
            "model": body["model"],
            "embeddings": [fake_vector(t, self._dim()) for t in inputs],
            "total_duration": 14143917, "load_duration": 1019500, "prompt_eval_count": 8,
        })

    async def openai_embeddings(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if self.mode == "error":
            return web.json_response({"error": {
                "message": "Incorrect API key provided: sk-wrong.", "type": "invalid_request_error",
                "param": None, "code": "invalid_api_key"}}, status=401)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, self._dim())}
                for i, t in enumerate(body["input"])]
        random.Random(7).shuffle(data)  # the spec orders by "index", not by position
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": 8, "total_tokens": 8}})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/embed", self.ollama_embed)
        app.router.add_post("/v1/embeddings", self.openai_embeddings)
        return app


@pytest.fixture
async def ollama_fake() -> AsyncIterator[tuple[Fake, str]]:
    fake = Fake(768)
    srv = await serve(fake.app())
    yield fake, url_of(srv)
    fake.release.set()
    await srv.close()


@pytest.fixture
async def openai_fake() -> AsyncIterator[tuple[Fake, str]]:
    fake = Fake(1536)
    srv = await serve(fake.app())
    yield fake, url_of(srv)
    fake.release.set()
    await srv.close()


async def start(**embedd: Any) -> TestServer:
    cfg = with_section(Config(), "embedd", timeout_seconds=0.5, **embedd)
    return await serve(make_app(cfg))


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(f"{url}/v1/embed", json=body) as resp:
        return resp.status, await resp.json()


async def test_ollama_request_shape_prefixes_and_dim(
        ollama_fake: tuple[Fake, str], http: aiohttp.ClientSession) -> None:
    fake, fake_url = ollama_fake
    srv = await start(backend="ollama", ollama_host=fake_url)
    try:
        url = url_of(srv)
        status, out = await post(http, url, {"texts": ["what is rag?"], "input_type": "query"})
        assert status == 200, out
        assert out["model"] == "nomic-embed-text" and out["dim"] == 768
        assert fake.requests[-1]["model"] == "nomic-embed-text"
        assert fake.requests[-1]["input"] == ["search_query: what is rag?"]

        status, out = await post(http, url, {"texts": ["RAG retrieves, then generates.", "b"]})
        assert status == 200
        assert fake.requests[-1]["input"] == ["search_document: RAG retrieves, then generates.",
                                              "search_document: b"]
        v = np.asarray(out["vectors"])
        assert v.shape == (2, 768)
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        want = np.asarray(fake_vector("search_document: b", 768))
        assert float(v[1] @ want / np.linalg.norm(want)) == pytest.approx(1.0, abs=1e-5)

        # The query and the document prefix are different texts to the cache as well.
        sent = len(fake.requests)
        status, _ = await post(http, url, {"texts": ["b"], "input_type": "query"})
        assert status == 200 and len(fake.requests) == sent + 1
        status, _ = await post(http, url, {"texts": ["b"]})
        assert status == 200 and len(fake.requests) == sent + 1  # served from the cache
    finally:
        await srv.close()


async def test_ollama_error_is_502_with_upstream_message(
        ollama_fake: tuple[Fake, str], http: aiohttp.ClientSession) -> None:
    fake, fake_url = ollama_fake
    fake.mode = "error"
    srv = await start(backend="ollama", ollama_host=fake_url)
    try:
        status, out = await post(http, url_of(srv), {"texts": ["x"]})
        assert status == 502 and out["error"]["code"] == "upstream_error"
        assert 'model "nomic-embed-text" not found, try pulling it first' in out["error"]["message"]

        fake.mode = "wrong_dim"
        status, out = await post(http, url_of(srv), {"texts": ["y"]})
        assert status == 502 and "769" in out["error"]["message"]
    finally:
        await srv.close()


async def test_ollama_timeout_is_504(
        ollama_fake: tuple[Fake, str], http: aiohttp.ClientSession) -> None:
    fake, fake_url = ollama_fake
    fake.mode = "slow"
    srv = await start(backend="ollama", ollama_host=fake_url)
    try:
        status, out = await post(http, url_of(srv), {"texts": ["x"]})
        assert status == 504 and out["error"]["code"] == "upstream_timeout"
    finally:
        await srv.close()


async def test_ollama_unreachable_is_502(http: aiohttp.ClientSession) -> None:
    srv = await start(backend="ollama", ollama_host="http://127.0.0.1:9")
    try:
        status, out = await post(http, url_of(srv), {"texts": ["x"]})
        assert status == 502 and "127.0.0.1:9" in out["error"]["message"]
    finally:
        await srv.close()


async def test_openai_request_shape_key_order_and_learned_dim(
        openai_fake: tuple[Fake, str], http: aiohttp.ClientSession) -> None:
    fake, fake_url = openai_fake
    srv = await start(backend="openai", openai_base_url=f"{fake_url}/v1",
                      openai_model="text-embedding-3-small", openai_api_key="sk-test")
    try:
        url = url_of(srv)
        async with http.get(f"{url}/v1/embed/models") as resp:
            assert (await resp.json())["models"] == [
                {"id": "text-embedding-3-small", "backend": "openai", "dim": None}]
        texts = [f"text number {i}" for i in range(6)]
        status, out = await post(http, url, {"texts": texts, "input_type": "query"})
        assert status == 200, out
        assert fake.requests[-1] == {"model": "text-embedding-3-small", "input": texts,
                                     "encoding_format": "float"}
        assert fake.headers[-1]["Authorization"] == "Bearer sk-test"
        assert out["dim"] == 1536
        v = np.asarray(out["vectors"])
        for i, t in enumerate(texts):  # back in request order despite the shuffled answer
            want = np.asarray(fake_vector(t, 1536))
            assert float(v[i] @ want / np.linalg.norm(want)) == pytest.approx(1.0, abs=1e-5)
        async with http.get(f"{url}/v1/embed/models") as resp:
            assert (await resp.json())["models"][0]["dim"] == 1536  # learned from the answer
    finally:
        await srv.close()


async def test_openai_error_and_timeout(
        openai_fake: tuple[Fake, str], http: aiohttp.ClientSession) -> None:
    fake, fake_url = openai_fake
    srv = await start(backend="openai", openai_base_url=fake_url, openai_model="m")
    try:
        fake.mode = "error"
        status, out = await post(http, url_of(srv), {"texts": ["x"]})
        assert status == 502
        assert "Incorrect API key provided: sk-wrong." in out["error"]["message"]
        assert "Authorization" not in fake.headers[-1]  # no key configured, none sent
        fake.mode = "slow"
        status, out = await post(http, url_of(srv), {"texts": ["x"]})
        assert status == 504 and out["error"]["code"] == "upstream_timeout"
    finally:
        await srv.close()


async def test_several_backends_a_request_picks_one(
        ollama_fake: tuple[Fake, str], http: aiohttp.ClientSession) -> None:
    fake, fake_url = ollama_fake
    srv = await start(backend="ollama", backends=("openai",), ollama_host=fake_url,
                      openai_base_url=fake_url, openai_model="text-embedding-3-small",
                      openai_dim=768)
    try:
        url = url_of(srv)
        async with http.get(f"{url}/v1/embed/models") as resp:
            assert await resp.json() == {"default": "nomic-embed-text", "models": [
                {"id": "nomic-embed-text", "backend": "ollama", "dim": 768},
                {"id": "text-embedding-3-small", "backend": "openai", "dim": 768}]}
        status, out = await post(http, url, {"texts": ["x"], "model": "text-embedding-3-small"})
        assert status == 200 and out["model"] == "text-embedding-3-small"
        assert fake.requests[-1]["input"] == ["x"]  # no nomic prefix for another model
        status, out = await post(http, url, {"texts": ["x"]})
        assert status == 200 and out["model"] == "nomic-embed-text"
        status, out = await post(http, url, {"texts": ["x"], "model": "all-MiniLM-L6-v2"})
        assert status == 400
        assert "nomic-embed-text, text-embedding-3-small" in out["error"]["message"]
    finally:
        await srv.close()


def test_openai_url_from_base_url() -> None:
    assert openai_embeddings_url("http://h:8080") == "http://h:8080/v1/embeddings"
    assert openai_embeddings_url("http://h:8080/") == "http://h:8080/v1/embeddings"
    assert openai_embeddings_url("https://api.openai.com/v1") == "https://api.openai.com/v1/embeddings"
    assert openai_embeddings_url("http://h/openai/v1/") == "http://h/openai/v1/embeddings"


class HoldingDocuments(Fake):
    """Holds every request holding a document until released; answers questions at once."""

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        if any("doc" in t for t in body["input"]):
            await asyncio.wait_for(self.release.wait(), 5)
        return body


@pytest.mark.parametrize("backend", ["ollama", "openai"])
async def test_remote_question_has_slots_of_its_own(backend: str,
                                                    http: aiohttp.ClientSession) -> None:
    fake = HoldingDocuments(768)
    upstream = await serve(fake.app())
    where = ({"ollama_host": url_of(upstream)} if backend == "ollama" else
             {"openai_base_url": f"{url_of(upstream)}/v1", "openai_model": "m"})
    cfg = with_section(Config(), "embedd", backend=backend, timeout_seconds=5.0,
                       remote_bulk_concurrency=1, remote_interactive_concurrency=1, **where)
    srv = await serve(make_app(cfg))
    url = url_of(srv)
    bulk = [asyncio.create_task(post(http, url, {"texts": [f"doc {i}"]})) for i in range(3)]
    try:
        for _ in range(100):  # one bulk call at the upstream, two waiting for its slot
            if len(fake.requests) == 1:
                break
            await asyncio.sleep(0.02)
        async with http.post(f"{url}{INTERACTIVE_PATH}",
                             json={"texts": ["a question"], "input_type": "query"}) as resp:
            assert resp.status == 200, await resp.text()
            assert resp.headers[LANE_HEADER] == "interactive"
        async with http.get(f"{url}/v1/embed/lanes") as resp:
            lanes = (await resp.json())["models"][0]["lanes"]
        assert lanes["bulk"]["pending"] == 2 and lanes["interactive"]["calls"] == 1
        assert not any(t.done() for t in bulk)  # the documents are still held
        fake.release.set()
        assert [status for status, _ in await asyncio.gather(*bulk)] == [200, 200, 200]
    finally:
        fake.release.set()
        await asyncio.gather(*bulk, return_exceptions=True)
        await srv.close()
        await upstream.close()
