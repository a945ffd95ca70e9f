"""`lakehouse up --replicas 1`: a streaming standby the stack makes, supervises and searches.

Writes go to the primary and answer with Lakehouse-LSN; a search sending it back through
the gateway is answered by the standby with the write in it, every time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import aiohttp

from internal.stack import postgres
from tests.helpers import ROOT
from tests.stack import upstack

C = "/v1/vectors/corpora"


async def _replicas(http: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with http.get(f"{url}/readyz") as resp:
        body = await resp.json()
    return list(body["components"]["vectord"]["detail"]["components"]["read_replicas"])


async def _until_ok(http: aiohttp.ClientSession, url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        got = await _replicas(http, url)
        if got and got[0]["state"] == "ok" and got[0]["in_use"]:
            return
        assert time.monotonic() < deadline, got
        await asyncio.sleep(0.2)


async def test_up_with_one_replica_answers_a_write_from_the_standby() -> None:
    # What is checked is the routing (a search with a write's position goes to the
    # standby once it has replayed it), not how fast a busy CI machine replays: a
    # generous wait and lag bound, so a slow fsync never sends a search to the primary.
    stack = upstack.start("lakehouse-up-replicas-", args=("--replicas", "1"),
                          env_extra={"LAKEHOUSE_VECTORD_REPLICA_WAIT": "10",
                                     "LAKEHOUSE_VECTORD_MAX_REPLICA_LAG": "60"})
    try:
        async with aiohttp.ClientSession() as http:
            url = stack.url
            await _until_ok(http, url)
            async with http.post(f"{url}{C}", json={"name": "rep", "dim": 4,
                                                    "language": "english"}) as resp:
                assert resp.status == 201, await resp.text()
            before = (await _replicas(http, url))[0]["searches"]
            for i in range(100):
                async with http.post(f"{url}{C}/rep/items", json={"items": [
                        {"id": f"r{i}", "vector": [1.0, 0.0, 0.0, float(i)],
                         "text": f"quetzal{i} feather"}]}) as resp:
                    assert resp.status == 200, await resp.text()
                    lsn = resp.headers["Lakehouse-LSN"]
                async with http.post(f"{url}{C}/rep/search", headers={"Lakehouse-LSN": lsn},
                                     json={"mode": "lexical", "query_text": f"quetzal{i}"}) as r:
                    body = await r.json()
                    assert r.status == 200, body
                assert [h["id"] for h in body["hits"]] == [f"r{i}"]
            after = (await _replicas(http, url))[0]
            assert after["searches"] - before == 100, after
            async with http.get(f"{url}/metrics") as resp:
                text = await resp.text()
            assert "lakehouse_read_replica_up{" in text and "lakehouse_read_replica_lag_seconds{" in text
        env = {**os.environ, "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"),
               "LAKEHOUSE_URL": url, "LAKEHOUSE_STATE_DIR": str(stack.tmp / "state")}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "internal.cli.main", *args], cwd=ROOT,
                                  capture_output=True, text=True, timeout=300, env=env)

        status = await asyncio.to_thread(cli, "status")
        assert "replica" in status.stdout and "in use" in status.stdout, status.stdout
        # Across commands: an ingest keeps its write position, the next search sends it.
        done = await asyncio.to_thread(cli, "ingest", str(ROOT / "docs/examples/tickets.jsonl"),
                                       "--corpus", "rep_tickets", "--quiet")
        assert done.returncode == 0, done.stderr
        kept = json.loads((stack.tmp / "state" / "session.json").read_text())
        assert "/" in kept[url][0]
        async with aiohttp.ClientSession() as http:
            before = (await _replicas(http, url))[0]["searches"]
        found = await asyncio.to_thread(cli, "search", "printer toner", "--corpora",
                                        "rep_tickets", "--k", "2")
        assert found.returncode == 0 and "T-1042" in found.stdout, found.stdout + found.stderr
        async with aiohttp.ClientSession() as http:
            assert (await _replicas(http, url))[0]["searches"] > before
        # The stack watches its standby like its primary: killed, it is started again.
        standby = postgres.standby_dir(stack.tmp / "pg", 1)
        pid = postgres.postmaster_pid(standby)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + 60
            while postgres.postmaster_pid(standby) in (None, pid):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
            await _until_ok(http, stack.url)
    finally:
        stack.stop()
    assert postgres.postmaster_pid(postgres.standby_dir(stack.tmp / "pg", 1)) is None
