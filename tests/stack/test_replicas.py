"""Two vectord replicas on one PostgreSQL behind matrixd and the gateway.

Killing one replica with SIGKILL while searches run through the gateway (its Upstream)
and through matrixd (the same Upstream, in ServiceClient) fails no search: a refused
connection moves on to the other replica, and so does a search whose connection died
mid-call (searches change nothing, so sending one again is safe).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from internal.pg import embedded
from internal.stack.plan import ChildSpec
from internal.stack.supervisor import Backoff, Supervisor
from tests.helpers import ROOT
from tests.stack import load
from tests.stack.ports import free_port

DIM = 8


@dataclass
class Replicas:
    sup: Supervisor
    gateway: str
    matrixd: str
    vectord: list[str]


def _spec(name: str, module: str, port: int, env: dict[str, str]) -> ChildSpec:
    return ChildSpec(name, module, "127.0.0.1", port, {
        **env, "LAKEHOUSE_LOG_LEVEL": "warning", "LAKEHOUSE_LOG_FORMAT": "json"})


async def _wait_ok(urls: list[str], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        for u in urls:
            while True:
                try:
                    async with http.get(u) as resp:
                        if resp.status == 200:
                            break
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                assert time.monotonic() < deadline, f"{u} never answered 200"
                await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
async def replicas() -> AsyncIterator[Replicas]:
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-replicas-test-"))
    pg = await asyncio.to_thread(embedded.start, tmp / "pg")
    ports = {n: free_port() for n in ("va", "vb", "matrixd", "gateway")}
    url = {n: f"http://127.0.0.1:{p}" for n, p in ports.items()}
    both = f"{url['va']},{url['vb']}"
    dead = f"http://127.0.0.1:{free_port()}"  # embedd/syncd: not part of this test
    env = {"LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"), "LAKEHOUSE_PG_DSN": pg.dsn,
           "LAKEHOUSE_MATRIXD_VECTORD_URL": both, "LAKEHOUSE_MATRIXD_EMBEDD_URL": "",
           "LAKEHOUSE_GATEWAY_VECTORD": both, "LAKEHOUSE_GATEWAY_MATRIXD": url["matrixd"],
           "LAKEHOUSE_GATEWAY_EMBEDD": dead, "LAKEHOUSE_GATEWAY_SYNCD": dead,
           "LAKEHOUSE_MATRIXD_PORT": str(ports["matrixd"]),
           "LAKEHOUSE_GATEWAY_PORT": str(ports["gateway"])}
    for k in ("LAKEHOUSE_TOKEN", "LAKEHOUSE_URL"):
        os.environ.pop(k, None)
    specs = [
        _spec("vectord-a", "internal.vectord.server", ports["va"],
              {**env, "LAKEHOUSE_VECTORD_PORT": str(ports["va"])}),
        _spec("vectord-b", "internal.vectord.server", ports["vb"],
              {**env, "LAKEHOUSE_VECTORD_PORT": str(ports["vb"])}),
        _spec("matrixd", "internal.matrixd.server", ports["matrixd"], env),
        _spec("gateway", "internal.gateway.server", ports["gateway"], env),
    ]
    sup = Supervisor(specs, log_dir=tmp / "logs", backoff=Backoff(first=5.0))
    await sup.start()
    try:
        # The gateway's /readyz wants embedd and syncd too: its /healthz is enough here.
        await _wait_ok([f"{url[n]}/readyz" for n in ("va", "vb", "matrixd")]
                       + [f"{url['gateway']}/healthz"])
        yield Replicas(sup, url["gateway"], url["matrixd"], [url["va"], url["vb"]])
    finally:
        await sup.stop()
        await asyncio.to_thread(pg.stop)
        shutil.rmtree(tmp, ignore_errors=True)


async def test_killing_one_of_two_vectord_replicas_fails_no_search(replicas: Replicas) -> None:
    base = replicas.gateway
    corpus = "replicas_test"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/v1/vectors/corpora", json={"name": corpus, "dim": DIM}) as r:
            assert r.status == 201, await r.text()
        rng = random.Random(1)
        items = [{"id": f"s{i}", "vector": load.unit(DIM, rng), "text": f"seed {i}"} for i in range(50)]
        async with http.post(f"{base}/v1/vectors/corpora/{corpus}/items", json={"items": items}) as r:
            assert r.status == 200, await r.text()

    stop = asyncio.Event()
    live = load.Load()
    runs = [
        load.run(base, corpus, DIM, stop, searchers=3, writers=0, load=live),
        load.run(base, corpus, DIM, stop, searchers=3, writers=0, load=live,
                 search_url=f"{replicas.matrixd}/v1/matrix/search"),
    ]
    tasks = [asyncio.ensure_future(r) for r in runs]
    await asyncio.sleep(2.0)
    victim = replicas.sup.children["vectord-a"]
    assert victim.proc is not None
    killed_at = time.monotonic()
    os.kill(victim.proc.pid, signal.SIGKILL)
    await asyncio.sleep(4.0)
    stop.set()
    await asyncio.gather(*tasks)

    searches = live.of("search")
    after = [a for a in searches if a.at >= killed_at]
    print(f"{len(searches)} searches, {len(after)} after the kill, "
          f"{len(live.failed())} failed")
    assert len(after) > 20
    assert live.failed() == []
    assert victim.last_exit == -signal.SIGKILL
