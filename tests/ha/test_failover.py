"""`lakehouse up --ha 3` losing its leader, under 4 writers and 8 searchers.

One real cluster for every case (etcd x3, Patroni x3 over the embedded PostgreSQL 18,
synchronous_mode), started once for the module: the leader's postmaster killed, the
leader frozen (SIGSTOP of its Patroni and PostgreSQL, a hung machine; SIGCONT later), the
leader's Patroni killed, a planned switchover, one etcd member lost. After each: every
write answered 2xx is on every node, writes were accepted again, the old node streams
as a replica, and searches failed only while the leader changed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import psutil
import pytest

from internal.ha import patroni
from internal.stack import cluster
from tests.ha import drill
from tests.helpers import ROOT
from tests.stack import upstack

pytestmark = pytest.mark.timeout(600)


class HaStack:
    def __init__(self, stack: upstack.Stack, folder: Path) -> None:
        self.stack = stack
        self.folder = folder
        self.urls = cluster.rest_urls(folder)
        self.dsns = cluster.node_dsns(folder)


@pytest.fixture(scope="module")
def ha() -> Iterator[HaStack]:
    base = Path(tempfile.mkdtemp(prefix="lakehouse-ha-"))
    base.chmod(0o755)  # Patroni and PostgreSQL run as the server's own user under root
    folder = base / "ha"
    stack = upstack.start("lakehouse-ha-stack-", args=("--ha", "3"), env_extra={
        "LAKEHOUSE_HA_DATA_DIR": str(folder), "LAKEHOUSE_HA_ETCD_MEMBERS": "3"})
    try:
        yield HaStack(stack, folder)
    finally:
        stack.stop()
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(folder) in " ".join(p.info["cmdline"] or [])], "a node outlived up"
    shutil.rmtree(base, ignore_errors=True)  # three nodes' WAL: gigabytes
    shutil.rmtree(stack.tmp, ignore_errors=True)


async def _case(ha: HaStack, name: str, fault: drill.Fault, *,
                expect_new_leader: bool = True) -> drill.Timeline:
    async with aiohttp.ClientSession() as http:
        load = drill.Load(ha.stack.url, f"ha_{name}")
        await load.create(http)
        load.start(http)
        try:
            await asyncio.sleep(2.0)
            timeline = await drill.run_case(name, load, http, ha.urls, fault,
                                            expect_new_leader=expect_new_leader)
        finally:
            await load.stop()
        print(json.dumps(timeline.row()))
        assert timeline.acked > 100, timeline
        ids = [i for _, i in load.acked]
        await drill.wait_replayed(ha.dsns)
        for dsn in ha.dsns:  # every acknowledged write, on every node
            assert await drill.missing_on(dsn, load.corpus, ids) == [], (dsn, timeline)
        nodes = await drill.cluster_now(http, ha.urls)
    lead = patroni.leader(nodes)
    assert lead is not None, nodes
    if expect_new_leader:
        assert timeline.elected is not None and lead.name != timeline.old_leader, timeline
    assert timeline.writes_back <= 30.0, timeline
    assert timeline.old_back is not None, (timeline, nodes)
    assert all(m.state in ("running", "streaming") for m in nodes), nodes
    assert timeline.searches_failed_outside == 0, timeline
    assert timeline.searches_failed_during <= max(1, timeline.searches // 100), timeline
    return timeline


async def test_leader_postmaster_killed(ha: HaStack) -> None:
    await _case(ha, "postmaster", drill.kill_postmaster(ha.folder))
    # Read-your-writes after the failover: a write's Lakehouse-LSN (on the new timeline)
    # sent back with a search is honoured by whichever node answers it.
    url, c = ha.stack.url, f"{drill.C}/ha_postmaster"
    async with aiohttp.ClientSession() as http:
        for i in range(20):
            async with http.post(f"{url}{c}/items", json={"items": [
                    {"id": f"ryw{i}", "vector": [0.0, 1.0, 0.0, float(i)],
                     "text": f"zanzibar{i} after failover"}]}) as resp:
                assert resp.status == 200, await resp.text()
                lsn = resp.headers["Lakehouse-LSN"]
            async with http.post(f"{url}{c}/search", headers={"Lakehouse-LSN": lsn},
                                 json={"mode": "lexical", "query_text": f"zanzibar{i}"}) as r:
                body = await r.json()
                assert r.status == 200, body
            assert [h["id"] for h in body["hits"]] == [f"ryw{i}"], body


async def test_leader_frozen_then_thawed(ha: HaStack) -> None:
    await _case(ha, "frozen", drill.freeze(ha.folder, 25.0))


async def test_leader_patroni_killed(ha: HaStack) -> None:
    # PostgreSQL runs on and the supervisor restarts Patroni within a second, well before
    # the leader key expires: the leader stays, and writes never stop.
    timeline = await _case(ha, "patroni", drill.kill_patroni(ha.folder), expect_new_leader=False)
    assert timeline.write_failures == 0, timeline


def _cli(ha: HaStack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"),
           "LAKEHOUSE_URL": ha.stack.url, "LAKEHOUSE_HA_DATA_DIR": str(ha.folder)}
    return subprocess.run([sys.executable, "-m", "internal.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)


async def test_status_and_planned_switchover(ha: HaStack) -> None:
    got = json.loads((await asyncio.to_thread(_cli, ha, "ha", "status", "--json")).stdout)
    roles = sorted(n["role"] for n in got["nodes"])
    assert roles == ["leader", "replica", "sync_standby"], got
    assert all(isinstance(n["pid"], int) and n["timeline"] for n in got["nodes"]), got
    target = next(n["name"] for n in got["nodes"] if n["role"] == "sync_standby")

    async def switch(_: patroni.Member) -> None:
        done = await asyncio.to_thread(_cli, ha, "ha", "switchover", "--to", target)
        assert done.returncode == 0, done.stdout + done.stderr

    timeline = await _case(ha, "switchover", switch)
    assert timeline.new_leader == target, timeline
    status = await asyncio.to_thread(_cli, ha, "status")
    assert "ha" in status.stdout and target in status.stdout, status.stdout
    async with aiohttp.ClientSession() as http, http.get(f"{ha.stack.url}/metrics") as resp:
        text = await resp.text()
    changes = next(line for line in text.splitlines()
                   if line.startswith("lakehouse_ha_leader_changes "))
    assert float(changes.split()[1]) >= 1, changes  # the failovers before, this one at least
    assert f'lakehouse_ha_replication_lag_bytes{{node="{target}"}}' in text, text[-2000:]


async def test_one_etcd_member_lost_changes_nothing(ha: HaStack) -> None:
    member = next(p for p in psutil.process_iter(["cmdline"])
                  if (p.info["cmdline"] or [""])[0].endswith("etcd")
                  and str(ha.folder) in " ".join(p.info["cmdline"]))

    async def kill_etcd(_: patroni.Member) -> None:
        member.kill()

    timeline = await _case(ha, "etcd", kill_etcd, expect_new_leader=False)
    assert timeline.write_failures == 0 and timeline.elected is None, timeline


async def test_backup_copies_a_replica(ha: HaStack) -> None:
    folder = ha.folder.parent / "backup"
    done = await asyncio.to_thread(_cli, ha, "backup", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads((await asyncio.to_thread(_cli, ha, "ha", "status", "--json")).stdout)
    replicas = {str(n["port"]) for n in got["nodes"] if n["role"] != "leader"}
    assert any(f"port={p}" in done.stdout for p in replicas), (done.stdout, got)
    assert "items" in done.stdout and (folder / "PG_VERSION").exists(), done.stdout
