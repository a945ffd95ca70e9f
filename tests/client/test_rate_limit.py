"""The client obeys 429: against a small server that answers 429 with Retry-After to every
other request, searches, reads and upserts (sync and async) are waited out and retried,
and finish with every item sent; a call that is not safe to repeat, or a wait longer than
the client's bound, raises TooManyRequests with the server's Retry-After."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from email.utils import formatdate
from typing import Any

import pytest
from aiohttp import web

import lakehouse
from internal.common.web import error_response
from lakehouse._transport import retry_after_seconds
from tests.helpers import serve, url_of

LISTING = {"corpora": [{"name": "docs", "dim": 3, "metric": "cosine", "language": "auto",
                        "model": None, "count": 1, "created_at": "2026-10-01T00:00:00Z",
                        "precision": "float16"}]}
ITEMS = [{"id": f"d{i}", "text": f"text {i}", "vector": [0.1, 0.2, float(i)]}
         for i in range(600)]  # three upsert batches


class HalfLimited:
    """A stack that refuses every other request with 429 (`retry_after` as its header)."""

    def __init__(self, retry_after: str = "0") -> None:
        self.retry_after = retry_after
        self.requests: list[str] = []
        self.upserted: list[str] = []

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.limit])
        app.router.add_get("/v1/vectors/corpora", self.corpora)
        app.router.add_post("/v1/vectors/corpora/docs/items", self.upsert)
        app.router.add_post("/v1/matrix/search", self.search)
        app.router.add_post("/v1/matrix/playbooks/record", self.record)
        return app

    @web.middleware
    async def limit(self, request: web.Request, handler: web.RequestHandler
                    ) -> web.StreamResponse:
        self.requests.append(f"{request.method} {request.path}")
        if len(self.requests) % 2 == 1:
            resp = error_response(429, "too_many_requests", "past this client's share",
                                  "rid-429")
            resp.headers["Retry-After"] = self.retry_after
            return resp
        return await handler(request)

    async def corpora(self, request: web.Request) -> web.Response:
        return web.json_response(LISTING)

    async def upsert(self, request: web.Request) -> web.Response:
        items = (await request.json())["items"]
        self.upserted += [it["id"] for it in items]
        return web.json_response({"upserted": len(items)})

    async def search(self, request: web.Request) -> web.Response:
        return web.json_response({"hits": [], "mode": "hybrid", "k": 3})

    async def record(self, request: web.Request) -> web.Response:
        return web.json_response({"playbook_id": "p1"})

    @contextlib.asynccontextmanager
    async def client(self, **options: Any) -> AsyncIterator[lakehouse.AsyncClient]:
        """An AsyncClient of this stack, served for the block."""
        server = await serve(self.app())
        try:
            async with lakehouse.AsyncClient(url_of(server), **options) as client:
                yield client
        finally:
            await server.close()


async def test_async_searches_reads_and_upserts_are_retried_after_429() -> None:
    stack = HalfLimited()
    async with stack.client(retries=0) as client:
        corpora = await client.list_corpora()
        found = await client.search("printer", corpora="docs", k=3)
        stored = await client.upsert("docs", ITEMS)
    assert [c.name for c in corpora] == ["docs"] and found.mode == "hybrid"
    assert stored == 600 and sorted(stack.upserted) == sorted(it["id"] for it in ITEMS)
    assert len(stack.requests) == 2 * (1 + 1 + 3)  # each call refused once, then served


async def test_the_blocking_client_obeys_429_too() -> None:
    stack = HalfLimited()
    server = await serve(stack.app())
    try:
        with lakehouse.Client(url_of(server), "tok", retries=0) as client:
            # In a thread: this loop must stay free to serve the answers.
            names = [c.name for c in await asyncio.to_thread(client.list_corpora)]
            stored = await asyncio.to_thread(client.upsert, "docs", ITEMS[:10])
    finally:
        await server.close()
    assert names == ["docs"] and stored == 10 and len(stack.upserted) == 10


async def test_a_call_not_safe_to_repeat_raises_with_retry_after() -> None:
    stack = HalfLimited(retry_after="2")
    async with stack.client() as client:
        with pytest.raises(lakehouse.TooManyRequests) as raised:
            await client.record("printer", "d1", "docs")
    err = raised.value
    assert (err.status, err.code, err.retry_after) == (429, "too_many_requests", 2.0)
    assert stack.requests == ["POST /v1/matrix/playbooks/record"]


async def test_a_wait_past_max_wait_raises_at_once() -> None:
    stack = HalfLimited(retry_after="120")
    started = time.monotonic()
    async with stack.client(max_wait=5) as client:
        with pytest.raises(lakehouse.TooManyRequests) as raised:
            await client.list_corpora()
    assert raised.value.retry_after == 120.0 and len(stack.requests) == 1
    assert time.monotonic() - started < 5  # did not sleep towards the 120 s


async def test_the_wait_is_the_servers_retry_after() -> None:
    stack = HalfLimited(retry_after="1")
    started = time.monotonic()
    async with stack.client(backoff=0) as client:
        await client.list_corpora()
    assert time.monotonic() - started >= 0.95 and len(stack.requests) == 2


def test_retry_after_reads_seconds_and_dates() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds("-4") == 0.0
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
