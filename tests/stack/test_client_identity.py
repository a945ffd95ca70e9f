"""Who a client is at the gateway, and what /metrics says of each, on the real stack.

`lakehouse up` with auth on (an admin token), two API keys and two tenant tokens signed by
the first key; each client may have 2 requests in flight and none waiting. A client is
its key: both tenant tokens and their key share one share (2 requests held by the
tenant tokens, the key's own search is 429) while the other key and the admin token are
served; /metrics names the key's id, a hash of the admin token, never a secret, and
shows each lane's queue and wait, per client, and embedd's lanes.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
import pytest

import lakehouse
from tests.helpers import ROOT
from tests.stack import upstack

ADMIN = "identity-admin-token-0123456789"
CORPUS = "handbook"


@pytest.fixture(scope="module")
def stack() -> Iterator[upstack.Stack]:
    s = upstack.start("lakehouse-identity-test-", env_extra={
        "LAKEHOUSE_TOKEN": ADMIN, "LAKEHOUSE_GATEWAY_CLIENT_IN_FLIGHT": "2",
        "LAKEHOUSE_GATEWAY_CLIENT_QUEUE": "0"})
    try:
        env = {**os.environ, "LAKEHOUSE_URL": s.url, "LAKEHOUSE_TOKEN": ADMIN}
        done = subprocess.run(
            [sys.executable, "-m", "internal.cli.main", "ingest",
             str(ROOT / "docs" / "examples" / "handbook.jsonl"), "--corpus", CORPUS, "--quiet"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        yield s
    finally:
        s.stop()
        shutil.rmtree(s.tmp, ignore_errors=True)


@dataclass
class Clients:
    base: str
    a_id: str
    a_key: str
    b_id: str
    b_key: str
    tenants: tuple[str, str]  # signed with a_key


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


@pytest.fixture
async def clients(stack: upstack.Stack, http: aiohttp.ClientSession) -> AsyncIterator[Clients]:
    made = []
    for name in ("identity-a", "identity-b"):
        async with http.post(f"{stack.url}/v1/keys", headers=bearer(ADMIN), json={
                "name": name, "actions": ["search"], "corpora": [CORPUS]}) as r:
            assert r.status == 201, await r.text()
            made.append(await r.json())
    a, b = made
    tenants = (lakehouse.tenant_token(a["key"], filter={"metadata": {"tenant": "acme"}}),
               lakehouse.tenant_token(a["key"], corpora=[CORPUS]))
    yield Clients(stack.url, a["id"], a["key"], b["id"], b["key"], tenants)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def search(http: aiohttp.ClientSession, base: str, credential: str
                 ) -> aiohttp.ClientResponse:
    async with http.post(f"{base}/v1/matrix/search", headers=bearer(credential),
                         json={"query_text": "printer paper jam", "corpora": [CORPUS]}) as r:
        await r.read()
        return r


async def metrics(http: aiohttp.ClientSession, base: str) -> str:
    async with http.get(f"{base}/metrics", headers=bearer(ADMIN)) as r:
        assert r.status == 200
        return await r.text()


def value(text: str, name: str, **labels: str) -> float | None:
    """The sample of `name` whose labels include `labels` (None: absent)."""
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", line)
        if m and all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
            return float(m.group(2))
    return None


async def hold(base: str, credential: str) -> asyncio.StreamWriter:
    """A search whose body never ends: it holds one of its client's places."""
    url = urlsplit(base)
    _, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(f"POST /v1/matrix/search HTTP/1.1\r\nHost: {url.netloc}\r\n"
                 f"Authorization: Bearer {credential}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 200\r\n\r\n{{".encode())
    await writer.drain()
    return writer


async def test_a_client_is_its_key_and_tenant_tokens_count_as_it(
        clients: Clients, http: aiohttp.ClientSession) -> None:
    c = clients
    a = f"k:{c.a_id}"
    held = [await hold(c.base, token) for token in c.tenants]
    try:
        deadline = time.monotonic() + 10
        while value(await metrics(http, c.base), "lakehouse_gateway_client_in_flight",
                    lane="search", client=a) != 2.0:
            assert time.monotonic() < deadline, "the two held searches never took places"
            await asyncio.sleep(0.05)
        refused = await search(http, c.base, c.a_key)  # the key itself: the same client
        assert refused.status == 429 and int(refused.headers["Retry-After"]) >= 1
        # Another tenant token of the same key: refused too (one application, one share).
        third = lakehouse.tenant_token(c.a_key)
        assert (await search(http, c.base, third)).status == 429
        # Other clients are served meanwhile: the other key, the admin token.
        assert (await search(http, c.base, c.b_key)).status == 200
        assert (await search(http, c.base, ADMIN)).status == 200
    finally:
        for writer in held:
            writer.close()
    deadline = time.monotonic() + 10
    while (await search(http, c.base, c.a_key)).status != 200:  # the places come back
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)

    text = await metrics(http, c.base)
    assert (value(text, "lakehouse_gateway_client_rejected_total", lane="search", client=a)
            or 0) >= 2
    assert value(text, "lakehouse_gateway_client_rejected_total", client=f"k:{c.b_id}") is None


async def test_metrics_show_each_lane_and_client_and_no_secret(
        clients: Clients, http: aiohttp.ClientSession) -> None:
    c = clients
    for credential in (c.a_key, c.a_key, c.tenants[0], c.tenants[1], c.b_key, ADMIN):
        assert (await search(http, c.base, credential)).status == 200
    # Authentication runs before admission: a request without a credential is 401 and
    # never counted (no address becomes a client while auth is on).
    assert (await search(http, c.base, "not-a-token")).status == 401
    text = await metrics(http, c.base)
    assert 'client="a:' not in text
    for secret in (ADMIN, c.a_key, c.b_key, *c.tenants):
        assert secret not in text
    # A client is its key: the key's searches and its tenant tokens' under one label.
    a_waits = value(text, "lakehouse_gateway_client_wait_seconds_count", lane="search",
                    client=f"k:{c.a_id}")
    assert a_waits == 4.0
    assert value(text, "lakehouse_gateway_client_wait_seconds_count", lane="search",
                 client=f"k:{c.b_id}") == 1.0
    # The admin token: 12 hex digits of its hash; its ingest's upserts in the write lane.
    admin = "t:" + hashlib.sha256(ADMIN.encode()).hexdigest()[:12]
    writes = value(text, "lakehouse_gateway_client_wait_seconds_count", lane="write",
                   client=admin)
    assert writes is not None and writes >= 1
    assert (value(text, "lakehouse_gateway_client_wait_seconds_count", lane="search",
                  client=admin) or 0) >= 1
    assert value(text, "lakehouse_gateway_client_in_flight", lane="search",
                 client=f"k:{c.a_id}") == 0.0
    assert value(text, "lakehouse_gateway_client_queued", lane="search",
                 client=f"k:{c.a_id}") == 0.0
    # Each lane's queue depth and requests in flight, all clients together.
    for lane in ("search", "write"):
        assert value(text, "lakehouse_gateway_lane_queued", lane=lane) == 0.0
        assert value(text, "lakehouse_gateway_lane_in_flight", lane=lane) == 0.0
    # embedd's lanes: the questions went to the interactive lane, the ingest to bulk.
    for lane in ("interactive", "bulk"):
        texts = value(text, "lakehouse_embed_lane_texts", lane=lane)
        assert texts is not None and texts >= 1, lane
        assert value(text, "lakehouse_embed_lane_pending", lane=lane) == 0.0
        wait = value(text, "lakehouse_embed_lane_wait_seconds_sum", lane=lane)
        assert wait is not None and wait >= 0
        assert value(text, "lakehouse_embed_lane_wait_max_seconds", lane=lane) is not None
