"""Auth, readiness, metrics and the API document of the gateway."""

from __future__ import annotations

import socket

import aiohttp

from internal.common.upstream import Upstream
from internal.config import Config
from internal.gateway.auth import token_ok
from internal.gateway.openapi import openapi_path
from internal.gateway.server import make_app
from tests.gateway.conftest import GatewayFactory
from tests.gateway.stubs import stub_app
from tests.helpers import serve, url_of, with_section


async def test_auth_off_by_default(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.get(f"{base}/v1/vectors/corpora") as resp:
        assert resp.status == 200


async def test_auth_on(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(tokens=("s3cret", "other"))
    async with http.get(f"{base}/v1/vectors/corpora") as resp:
        assert resp.status == 401
        body = await resp.json()
        assert body["error"]["code"] == "unauthorized"
        assert body["request_id"]
    async with http.get(f"{base}/v1/vectors/corpora", headers={"Authorization": "Bearer nope"}) as resp:
        assert resp.status == 401
    async with http.get(f"{base}/metrics") as resp:
        assert resp.status == 401
    async with http.get(f"{base}/v1/vectors/corpora", headers={"Authorization": "Bearer other"}) as resp:
        assert resp.status == 200
        # The client's token is not forwarded; the daemon sees the gateway's service token
        # (the first client token when no service_token is set).
        assert resp.headers["X-Seen-Auth"] == "Bearer s3cret"
    svc = await gateway(tokens=("s3cret",), service_token="svc-token")
    async with http.get(f"{svc}/v1/vectors/corpora", headers={
            "Authorization": "Bearer s3cret", "X-Forwarded-For": "6.6.6.6"}) as resp:
        assert resp.status == 200
        assert resp.headers["X-Seen-Auth"] == "Bearer svc-token"
        # A client-written X-Forwarded-For is replaced by the connection's address,
        # and no Server header tells software or versions.
        assert resp.headers["X-Seen-XFF"] == "127.0.0.1"
        assert resp.headers["Server"] == "lakehouse"
    for path in ("/healthz", "/readyz", "/openapi.json"):
        async with http.get(f"{base}{path}") as resp:
            assert resp.status == 200, path


def test_token_check() -> None:
    tokens = [b"abc", b"def"]
    assert token_ok("Bearer def", tokens)
    assert token_ok("bearer abc", tokens)
    assert not token_ok("Bearer abcd", tokens)
    assert not token_ok("Basic abc", tokens)
    assert not token_ok("", tokens)


async def test_readyz_per_component(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.get(f"{base}/readyz") as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["status"] == "ok"
    assert set(body["components"]) == {"embedd", "vectord", "matrixd", "syncd", "mcpd", "postgres"}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    sick_vectord = await serve(stub_app("vectord", postgres_ok=False))
    try:
        base = await gateway(embedd=(dead,), vectord=(url_of(sick_vectord),))
        async with http.get(f"{base}/readyz") as resp:
            assert resp.status == 503
            body = await resp.json()
    finally:
        await sick_vectord.close()
    comps = body["components"]
    assert body["status"] == "degraded"
    assert comps["embedd"]["status"] == "unavailable"
    assert comps["vectord"]["status"] == "not_ready"
    assert comps["postgres"]["status"] == "not_ready"
    assert comps["matrixd"]["status"] == "ok"


async def test_metrics_per_route_and_upstream(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway()
    async with http.post(f"{base}/v1/vectors/corpora/docs/search", json={}) as resp:
        assert resp.status == 200
    async with http.get(f"{base}/metrics") as resp:
        text = await resp.text()
    assert 'lakehouse_gateway_requests_total{method="POST",route="/v1/vectors/corpora/{name}/search",status="200"} 1.0' in text
    assert 'lakehouse_gateway_request_seconds_bucket{le="0.5",method="POST",route="/v1/vectors/corpora/{name}/search"}' in text
    assert 'lakehouse_gateway_upstream_requests_total{status="200",upstream="vectord"} 1.0' in text
    assert 'lakehouse_gateway_upstream_seconds_count{upstream="vectord"} 1.0' in text


def test_two_apps_in_one_process_have_separate_metrics() -> None:
    make_app(Config())
    make_app(Config())  # a shared global registry would raise "Duplicated timeseries"


async def test_every_route_is_in_openapi(gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(tokens=("t",))
    async with http.get(f"{base}/openapi.json") as resp:
        doc = await resp.json()
    app = make_app(with_section(Config(), "gateway", tokens=("t",)))
    checked = 0
    for route in app.router.routes():
        path = openapi_path(route.resource.canonical) if route.resource else None
        assert path in doc["paths"], path
        if route.method == "HEAD":
            continue  # added by aiohttp next to each GET
        methods = ["get", "post", "delete"] if route.method == "*" else [route.method.lower()]
        for method in methods:
            op = doc["paths"][path][method]
            assert {"200", "201", "202"} & set(op["responses"]), (path, method)
            checked += 1
    assert checked > 20
    search = doc["paths"]["/v1/matrix/search"]["post"]
    ref = search["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "query_text" in schema["properties"]
    assert "corpora" not in schema.get("required", [])  # absent: every corpus
    assert "bearer" in doc["components"]["securitySchemes"]


def test_upstream_order_round_robin_and_backoff() -> None:
    now = [100.0]
    up = Upstream("vectord", ["http://a", "http://b", "http://c"], backoff_seconds=5, clock=lambda: now[0])
    firsts = [up.order()[0] for _ in range(6)]
    assert firsts == ["http://a", "http://b", "http://c"] * 2
    up.mark_failed("http://b")
    for _ in range(4):
        order = up.order()
        assert order[-1] == "http://b"  # resting: tried last, never first
        assert order[0] != "http://b"
    now[0] += 5.1
    assert "http://b" in [up.order()[0] for _ in range(3)]
    up.mark_failed("http://a")
    now[0] += 1
    up.mark_failed("http://b")
    up.mark_failed("http://c")
    assert up.order() == ["http://a", "http://b", "http://c"]  # all resting: soonest back first
