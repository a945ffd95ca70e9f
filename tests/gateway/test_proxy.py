"""The gateway relays bodies, statuses and errors unchanged, and reports what fails."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import AsyncIterator

import aiohttp
from aiohttp.test_utils import TestServer

from internal.api.embedd import INTERACTIVE_PATH
from tests.gateway.conftest import GatewayFactory
from tests.gateway.stubs import stub_app
from tests.helpers import serve


async def test_body_and_status_pass_through(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    payload = json.dumps({"texts": ["ünïcode", "x" * 10000]}).encode()
    async with http.post(f"{base}/v1/embed?status=201", data=payload,
                         headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 201
        assert await resp.read() == payload
        assert resp.headers["X-Served-By"] == "embedd"
        assert resp.content_type == "application/json"


async def test_each_prefix_reaches_its_daemon(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    for path, daemon in (("/v1/embed/models", "embedd"), ("/v1/vectors/corpora/a/ids?limit=3", "vectord"),
                         ("/v1/matrix/search", "matrixd"), ("/v1/sync/status", "syncd"),
                         ("/v1/vectors/some/new/route", "vectord")):
        async with http.get(f"{base}{path}") as resp:
            assert resp.status == 200, path
            assert resp.headers["X-Served-By"] == daemon, path


async def test_daemon_error_passes_unchanged(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.post(f"{base}/v1/vectors/error", json={}) as resp:
        assert resp.status == 409
        body = await resp.json()
    assert body == {"error": {"code": "conflict", "message": "corpus 'x' exists (vectord)"},
                    "request_id": "from-daemon"}


async def test_request_id_forwarded_or_made(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.get(f"{base}/v1/matrix/x", headers={"X-Request-ID": "trace-123"}) as resp:
        assert resp.headers["X-Seen-Request-ID"] == "trace-123"
        assert resp.headers["X-Request-ID"] == "trace-123"
    async with http.get(f"{base}/v1/matrix/x") as resp:
        made = resp.headers["X-Seen-Request-ID"]
        assert len(made) >= 16
        assert resp.headers["X-Request-ID"] == made


async def test_hop_by_hop_dropped_end_to_end_kept(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.get(f"{base}/v1/embed/x", headers={"TE": "trailers", "X-Custom": "kept"}) as resp:
        assert resp.headers["X-Seen-TE"] == ""
        assert resp.headers["X-Seen-Custom"] == "kept"


async def test_large_response_streams_intact(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    size = 5 * 1024 * 1024 + 17
    digest = hashlib.sha256()
    got = 0
    async with http.get(f"{base}/v1/vectors/big?bytes={size}") as resp:
        assert resp.status == 200
        async for chunk in resp.content.iter_chunked(65536):
            digest.update(chunk)
            got += len(chunk)
    block = bytes(range(256)) * 256
    expected = hashlib.sha256((block * (size // len(block) + 1))[:size]).hexdigest()
    assert got == size
    assert digest.hexdigest() == expected


async def test_body_limit_413(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(max_body_bytes=1000)
    async with http.post(f"{base}/v1/embed", data=b"x" * 1001) as resp:
        assert resp.status == 413
        assert (await resp.json())["error"]["code"] == "payload_too_large"

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"y" * 500

    async with http.post(f"{base}/v1/embed", data=chunked()) as resp:
        assert resp.status == 413
        assert (await resp.json())["error"]["code"] == "payload_too_large"
    async with http.post(f"{base}/v1/embed", data=b"x" * 1000) as resp:
        assert resp.status == 200


async def test_upstream_timeout_504(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(matrix_timeout=0.3)
    async with http.post(f"{base}/v1/matrix/slow", json={}) as resp:
        assert resp.status == 504
        body = await resp.json()
    assert body["error"]["code"] == "upstream_timeout"
    assert "matrixd" in body["error"]["message"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_stopped_daemon_503_then_recovers(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    port = _free_port()
    base = await gateway(vectord=(f"http://127.0.0.1:{port}",), backoff_seconds=60.0)
    async with http.get(f"{base}/v1/vectors/corpora") as resp:
        assert resp.status == 503
        body = await resp.json()
    assert body["error"]["code"] == "vectord_unavailable"
    assert "vectord" in body["error"]["message"]
    assert body["request_id"] == resp.headers["X-Request-ID"]

    back = TestServer(stub_app("vectord"), host="127.0.0.1", port=port)
    await back.start_server()
    try:
        # The only address is still in back-off, yet it is tried: the daemon is back.
        async with http.get(f"{base}/v1/vectors/corpora") as resp:
            assert resp.status == 200
            assert resp.headers["X-Served-By"] == "vectord"
    finally:
        await back.close()


async def test_round_robin_skips_failed_replica(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    a = await serve(stub_app("matrixd-a"))
    b = await serve(stub_app("matrixd-b"))
    dead = f"http://127.0.0.1:{_free_port()}"
    try:
        base = await gateway(matrixd=(f"http://127.0.0.1:{a.port}", dead, f"http://127.0.0.1:{b.port}"))
        served = []
        for _ in range(9):
            async with http.get(f"{base}/v1/matrix/corpora") as resp:
                assert resp.status == 200
                served.append(resp.headers["X-Served-By"])
        assert set(served) == {"matrixd-a", "matrixd-b"}
        assert abs(served.count("matrixd-a") - served.count("matrixd-b")) <= 2
    finally:
        await a.close()
        await b.close()


def test_forward_headers_drops_hop_by_hop_and_connection_named() -> None:
    from multidict import CIMultiDict

    from internal.gateway.proxy import _DROP_FROM_REQUEST, _forward_headers

    given = CIMultiDict([("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"),
                         ("Keep-Alive", "timeout=5"), ("Host", "a"), ("TE", "trailers"),
                         ("Authorization", "Bearer t"), ("X-Custom", "a"), ("X-Custom", "b"),
                         ("Content-Type", "application/json")])
    out = _forward_headers(given, _DROP_FROM_REQUEST)
    assert list(out.items()) == [("X-Custom", "a"), ("X-Custom", "b"),
                                 ("Content-Type", "application/json")]
    assert "Authorization" in _forward_headers(given)  # only the request side drops it


async def test_gateway_does_not_forward_the_interactive_route(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.post(f"{base}{INTERACTIVE_PATH}", json={"texts": ["jump the queue"]}) as resp:
        assert resp.status == 404
        assert "X-Served-By" not in resp.headers
