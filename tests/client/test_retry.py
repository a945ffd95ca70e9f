"""Retries and timeouts against a small local server that plays an unavailable stack:
503 answers, a port nobody listens on yet, an answer that comes too late."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

import lakehouse
from internal.common.web import error_response
from tests.helpers import serve, url_of
from tests.stack.ports import free_port

CORPORA = "/v1/vectors/corpora"
LISTING = {"corpora": [{"name": "docs", "dim": 3, "metric": "cosine", "language": "auto",
                        "model": None, "count": 1, "created_at": "2026-10-01T00:00:00Z",
                        "precision": "float16"}]}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def app_of(method: str, path: str, handler: Handler) -> web.Application:
    app = web.Application()
    app.router.add_route(method, path, handler)
    return app


def flaky(failures: int, seen: list[str], code: str = "vectord_unavailable") -> web.Application:
    """GET /v1/vectors/corpora: a 503 `failures` times, then the listing."""
    async def corpora(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if len(seen) <= failures:
            return error_response(503, code, "not now", "rid-503")
        return web.json_response(LISTING)

    return app_of("GET", CORPORA, corpora)


async def test_503_twice_then_200_is_retried() -> None:
    seen: list[str] = []
    server = await serve(flaky(2, seen))
    try:
        async with lakehouse.AsyncClient(url_of(server), "tok", backoff=0.01) as client:
            corpora = await client.list_corpora()
    finally:
        await server.close()
    assert [c.name for c in corpora] == ["docs"] and corpora[0].count == 1
    assert seen == ["Bearer tok"] * 3


async def test_503_beyond_the_bound_raises_unavailable() -> None:
    seen: list[str] = []
    server = await serve(flaky(10, seen))
    try:
        async with lakehouse.AsyncClient(url_of(server), retries=2, backoff=0.01) as client:
            with pytest.raises(lakehouse.Unavailable) as raised:
                await client.list_corpora()
    finally:
        await server.close()
    err = raised.value
    assert (err.status, err.code, err.request_id) == (503, "vectord_unavailable", "rid-503")
    assert len(seen) == 3  # the first attempt and two retries


async def test_a_feature_that_is_off_is_not_retried() -> None:
    seen: list[str] = []
    server = await serve(flaky(10, seen, code="sync_not_configured"))
    try:
        async with lakehouse.AsyncClient(url_of(server), backoff=0.01) as client:
            with pytest.raises(lakehouse.Unavailable) as raised:
                await client.list_corpora()
    finally:
        await server.close()
    assert raised.value.code == "sync_not_configured" and len(seen) == 1


async def test_refused_while_the_stack_starts_then_served() -> None:
    port = free_port()
    seen: list[str] = []
    runner = web.AppRunner(flaky(0, seen))
    async with lakehouse.AsyncClient(f"http://127.0.0.1:{port}", retries=8,
                                     backoff=0.05) as client:
        call = asyncio.create_task(client.list_corpora())  # refused: nothing listens yet
        await asyncio.sleep(0.3)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            corpora = await call
        finally:
            await runner.cleanup()
    assert [c.name for c in corpora] == ["docs"] and len(seen) == 1


def test_nothing_listening_raises_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with lakehouse.Client(url, retries=1, backoff=0.01) as client, \
            pytest.raises(lakehouse.Unavailable) as raised:
        client.list_corpora()
    assert raised.value.code == "gateway_unavailable" and url in raised.value.message


async def test_a_timeout_is_raised_not_retried() -> None:
    calls: list[int] = []

    async def slow(request: web.Request) -> web.Response:
        calls.append(1)
        await asyncio.sleep(5)
        return web.json_response(LISTING)

    server = await serve(app_of("GET", CORPORA, slow))
    try:
        async with lakehouse.AsyncClient(url_of(server), timeout=0.2, backoff=0.01) as client:
            with pytest.raises(lakehouse.UpstreamTimeout) as raised:
                await client.list_corpora()
    finally:
        await server.close()
    assert (raised.value.code, raised.value.request_id) == ("timeout", None)
    assert calls == [1]


async def test_an_answer_of_the_wrong_shape_is_an_upstream_error() -> None:
    async def odd(request: web.Request) -> web.Response:
        return web.json_response({"corpora": "none"})

    server = await serve(app_of("GET", CORPORA, odd))
    try:
        async with lakehouse.AsyncClient(url_of(server)) as client:
            with pytest.raises(lakehouse.UpstreamError) as raised:
                await client.list_corpora()
    finally:
        await server.close()
    assert raised.value.code == "invalid_response"
