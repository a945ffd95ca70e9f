"""Per-client shares at the gateway: a client past its share gets 429 with Retry-After,
and another client is served meanwhile."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tests.gateway.conftest import GatewayFactory


async def test_a_client_over_its_share_gets_429_and_the_other_does_not(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(tokens=("token-busy", "token-calm"), client_in_flight=2,
                         client_queue=1, max_in_flight=8)
    busy = {"Authorization": "Bearer token-busy"}
    calm = {"Authorization": "Bearer token-calm"}

    async def slow() -> int:  # the stub answers /slow after 3 s
        async with http.post(f"{base}/v1/matrix/slow", json={}, headers=busy) as resp:
            return resp.status

    held = [asyncio.ensure_future(slow()) for _ in range(3)]  # 2 in flight, 1 waiting
    await asyncio.sleep(0.3)
    # The busy client's writes are past its share (its searches have a lane of their own).
    async with http.post(f"{base}/v1/matrix/slow", json={}, headers=busy) as resp:
        assert resp.status == 429
        assert int(resp.headers["Retry-After"]) >= 1
        body = await resp.json()
        assert body["error"]["code"] == "rate_limited"
        assert body["request_id"] == resp.headers["X-Request-ID"]
    async with http.post(f"{base}/v1/matrix/search", json={}, headers=calm) as resp:
        assert resp.status == 200
    assert await asyncio.gather(*held) == [200, 200, 200]  # the one waiting ran after

    async with http.get(f"{base}/metrics", headers=calm) as resp:
        text = await resp.text()
    assert "token-busy" not in text and "token-calm" not in text
    rejected = [line for line in text.splitlines()
                if line.startswith("lakehouse_gateway_client_rejected_total{")]
    assert len(rejected) == 1 and rejected[0].endswith(" 1.0")
    assert 'client="t:' in rejected[0]


async def test_waiting_too_long_for_a_place_is_429(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(client_in_flight=1, client_queue=4, queue_timeout=0.5)
    held = asyncio.ensure_future(http.post(f"{base}/v1/matrix/slow", json={}))
    await asyncio.sleep(0.2)
    async with http.post(f"{base}/v1/matrix/slow", json={}) as resp:
        assert resp.status == 429
        assert "Retry-After" in resp.headers
    (await held).release()


async def test_searches_have_places_of_their_own(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    """A client's slow writes fill its share of writes; its searches still run, and past
    the searches' places (search_in_flight) a search waits for one, never a write's."""
    base = await gateway(client_in_flight=1, client_queue=4, search_in_flight=1)
    held = asyncio.ensure_future(http.post(f"{base}/v1/matrix/slow", json={}))
    await asyncio.sleep(0.2)
    async with http.post(f"{base}/v1/matrix/search", json={}) as resp:
        assert resp.status == 200
    async with http.post(f"{base}/v1/matrix/answer", json={}) as resp:
        assert resp.status == 200  # an answer is a search: the searches' places
    (await held).release()


async def test_an_answers_events_are_relayed_as_they_come(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    """The gateway passes a streamed answer's first event on at once, not at its end."""
    base = await gateway()
    t0 = time.perf_counter()
    async with http.post(f"{base}/v1/matrix/answer", json={"stream": True}) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        first = await resp.content.readuntil(b"\n\n")
        at = time.perf_counter() - t0
        rest = await resp.read()
    assert first.startswith(b"event: citations") and at < 0.8, at
    assert rest.endswith(b"data: [DONE]\n\n") and time.perf_counter() - t0 >= 1.0


async def test_health_and_metrics_are_outside_the_shares(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    base = await gateway(client_in_flight=1, client_queue=0)
    held = asyncio.ensure_future(http.post(f"{base}/v1/matrix/slow", json={}))
    await asyncio.sleep(0.2)
    for path in ("/healthz", "/metrics", "/openapi.json"):
        async with http.get(f"{base}{path}") as resp:
            assert resp.status == 200, path
    async with http.post(f"{base}/v1/matrix/slow", json={}) as resp:
        assert resp.status == 429  # while /v1 writes are held to the share
    (await held).release()


async def test_a_light_clients_search_is_marked_for_the_daemons(
        gateway: GatewayFactory, http: aiohttp.ClientSession) -> None:
    """light_priority: a search of a client with nothing else in flight goes on with
    `Lakehouse-Priority: light`; a busy client's does not, whatever it sends itself."""
    base = await gateway(tokens=("token-busy", "token-calm"))  # light_priority: the default
    busy = {"Authorization": "Bearer token-busy"}
    calm = {"Authorization": "Bearer token-calm"}
    held = asyncio.ensure_future(http.get(f"{base}/v1/matrix/slow", headers=busy))  # a read
    await asyncio.sleep(0.3)
    async with http.post(f"{base}/v1/matrix/search", json={},
                         headers={**busy, "Lakehouse-Priority": "light"}) as resp:
        assert resp.status == 200 and resp.headers["X-Seen-Priority"] == ""
    async with http.post(f"{base}/v1/matrix/search", json={}, headers=calm) as resp:
        assert resp.status == 200 and resp.headers["X-Seen-Priority"] == "light"
    async with http.post(f"{base}/v1/vectors/corpora/x/items", json={}, headers=calm) as resp:
        assert resp.headers["X-Seen-Priority"] == ""  # writes are never marked
    (await held).release()
    off = await gateway(light_priority=False)
    async with http.post(f"{off}/v1/matrix/search", json={},
                         headers={"Lakehouse-Priority": "light"}) as resp:
        assert resp.headers["X-Seen-Priority"] == ""  # turned off; a client's own dropped
