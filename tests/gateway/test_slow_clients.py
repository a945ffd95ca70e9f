"""Slow and many clients are contained at the gateway.

A slow body costs a gateway task, never a daemon connection; waiting for a daemon
connection is bounded; a search whose replica dies mid-call is answered by the other.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from tests.gateway.conftest import GatewayFactory
from tests.helpers import serve, url_of


async def _slow_sender(host: str, port: int, path: str, total: int, pause: float) -> bytes:
    """A raw HTTP client that declares `total` body bytes and sends one per `pause`
    until the server answers; returns the answer."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {total}\r\n\r\n".encode())
    answer = asyncio.ensure_future(reader.read(4096))
    try:
        for _ in range(total):
            if answer.done():
                break
            try:
                writer.write(b" ")
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.wait([answer], timeout=pause)
        return await asyncio.wait_for(answer, 10)
    finally:
        writer.close()


async def test_slow_body_is_408_and_holds_no_daemon_connection(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(body_timeout=1.0, upstream_connections=1)
    host, port = base.removeprefix("http://").split(":")
    slow = asyncio.ensure_future(_slow_sender(host, int(port), "/v1/vectors/corpora/c/search",
                                              1000, 0.2))
    await asyncio.sleep(0.3)
    # With one connection to vectord allowed, a slow body holding it would block this.
    async with http.post(f"{base}/v1/vectors/corpora/c/search", json={"k": 1}) as resp:
        assert resp.status == 200
    answer = await slow
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"request_timeout"' in answer


async def test_waiting_for_a_daemon_connection_is_bounded(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(upstream_connections=1, upstream_wait=0.3, matrix_timeout=10.0)
    first = asyncio.ensure_future(http.post(f"{base}/v1/matrix/slow", json={}))
    await asyncio.sleep(0.3)  # the one connection to matrixd is now busy for 3 s
    async with http.post(f"{base}/v1/matrix/slow", json={}) as resp:
        assert resp.status == 503
        body = await resp.json()
    assert body["error"]["code"] == "matrixd_unavailable"
    # Other daemons have their own connections.
    async with http.get(f"{base}/v1/vectors/corpora") as resp:
        assert resp.status == 200
    (await first).close()


def _dies_mid_call(name: str) -> web.Application:
    """A replica that takes a search and drops the connection without answering."""

    async def drop(request: web.Request) -> web.Response:
        await request.read()
        assert request.transport is not None
        request.transport.abort()
        await asyncio.sleep(1)
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", drop)
    return app


async def test_search_lost_mid_call_is_answered_by_another_replica(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    from tests.gateway.stubs import stub_app

    bad = await serve(_dies_mid_call("vectord-a"))
    good = await serve(stub_app("vectord-b"))
    try:
        base = await gateway(vectord=(url_of(bad), url_of(good)), backoff_seconds=60.0)
        for _ in range(4):
            async with http.post(f"{base}/v1/vectors/corpora/c/search", json={"k": 1}) as resp:
                assert resp.status == 200
                assert resp.headers["X-Served-By"] == "vectord-b"
        # A write is not retried: its answer may have been lost after a commit.
        base = await gateway(vectord=(url_of(bad),), backoff_seconds=60.0)
        async with http.post(f"{base}/v1/vectors/corpora/c/items", json={"items": []}) as resp:
            assert resp.status == 503
    finally:
        await bad.close()
        await good.close()


async def test_a_slow_write_does_not_hold_a_search_connection(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(upstream_connections=1, upstream_wait=0.3, vectors_timeout=10.0)
    write = asyncio.ensure_future(http.post(f"{base}/v1/vectors/slow", json={}))
    await asyncio.sleep(0.3)  # the one write connection to vectord is busy for 3 s
    async with http.post(f"{base}/v1/vectors/search", json={"k": 1}) as resp:
        assert resp.status == 200  # a search has connections of its own
        assert resp.headers["X-Served-By"] == "vectord"
    async with http.post(f"{base}/v1/vectors/slow", json={}) as resp:
        assert resp.status == 503  # another write waits for the write connection, bounded
    (await write).close()
