"""A revoked key stops opening anything on every gateway replica within a second.

Two gateways (the real app, in-process) in front of one real vectord on the test
PostgreSQL, auth on: a key is created through one, used through both (so each holds its
row), revoked through the first; both refuse it within a second of the revocation's
answer, and the key's secret never opens anything again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from internal.config import Config
from internal.gateway.keyauth import REFRESH_SECONDS
from tests.helpers import serve, url_of, with_section

ADMIN, SERVICE = "replicas-admin-token", "replicas-service-token"


@pytest.fixture
async def replicas(base_cfg: Config) -> AsyncIterator[list[str]]:
    from internal.gateway.server import make_app as gateway_app
    from internal.vectord.server import make_app as vectord_app

    cfg = with_section(base_cfg, "gateway", tokens=(ADMIN,), service_token=SERVICE)
    vectord = await serve(vectord_app(cfg))
    cfg = with_section(cfg, "gateway", vectord=(url_of(vectord),))
    gateways = [await serve(gateway_app(cfg)) for _ in range(2)]
    yield [url_of(g) for g in gateways]
    for server in (*gateways, vectord):
        await server.close()


async def _status(http: aiohttp.ClientSession, url: str, secret: str) -> int:
    async with http.get(f"{url}/v1/vectors/corpora",
                        headers={"Authorization": f"Bearer {secret}"}) as resp:
        await resp.read()
        return resp.status


async def test_revocation_reaches_every_replica_within_a_second(replicas: list[str]) -> None:
    assert REFRESH_SECONDS < 1.0
    admin = {"Authorization": f"Bearer {ADMIN}"}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{replicas[0]}/v1/keys", headers=admin, json={
                "name": "replicated", "actions": ["read"], "corpora": ["*"]}) as resp:
            created = await resp.json()
            assert resp.status == 201, created
        secret = created["key"]
        # Each replica reads the row now, so each holds it as fresh as it can be.
        assert [await _status(http, url, secret) for url in replicas] == [200, 200]
        async with http.delete(f"{replicas[0]}/v1/keys/{created['id']}", headers=admin) as resp:
            assert resp.status == 200, await resp.text()
        revoked_at = time.monotonic()
        refused: dict[str, float] = {}
        while len(refused) < len(replicas) and time.monotonic() - revoked_at < 3.0:
            for url in replicas:
                if url not in refused and await _status(http, url, secret) == 401:
                    refused[url] = time.monotonic() - revoked_at
        print("refused after (s):", {u: round(t, 3) for u, t in refused.items()})
        assert sorted(refused) == sorted(replicas), refused
        assert max(refused.values()) < 1.0, refused
        # And it stays refused.
        assert [await _status(http, url, secret) for url in replicas] == [401, 401]
