"""Failover of `lakehouse up --ha 3` and the cost of synchronous replication.

Two stacks: one with --ha 3 (etcd x3, Patroni x3 over the embedded PostgreSQL,
synchronous_mode on) and one with the single embedded server. A bulk upsert of --items
items (384-d vectors and text, batches of 500, through the gateway) into a new corpus of
each, alternating rounds, and the ratio HA / single per round; then the timeline of each
failure under 4 writers and 8 searchers (tests/ha/drill.py): fault -> new leader elected
-> first write accepted again -> old node streaming as a replica, with writes
acknowledged, writes lost (acknowledged but missing on a node: must be 0) and searches
failed.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import aiohttp
import numpy as np

from bench.harness import Run
from bench.harness.http import CORPORA, post
from internal.ha import patroni
from internal.stack import cluster
from tests.ha import drill

OPTIONS = {"items": 10000, "rounds": 3}
QUICK = {"items": 2000, "rounds": 1}


async def bulk(http: aiohttp.ClientSession, url: str, corpus: str, items: int) -> float:
    """Seconds to upsert `items` items into a new corpus, 500 a request."""
    await post(http, f"{url}{CORPORA}", {"name": corpus, "dim": 384, "language": "english"})
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    for start in range(0, items, 500):
        vecs = rng.standard_normal((min(500, items - start), 384)).astype(np.float32)
        await post(http, f"{url}{CORPORA}/{corpus}/items", {"items": [
            {"id": f"i{start + j}", "vector": [float(x) for x in v],
             "text": f"bulk item {start + j} of the failover bench"} for j, v in enumerate(vecs)]})
    return time.perf_counter() - started


async def main(run: Run) -> int:
    a = run.args
    folder = run.folder / "ha"
    run.folder.chmod(0o755)  # Patroni and PostgreSQL run as the server's own user under root
    ha_env = {"LAKEHOUSE_HA_DATA_DIR": str(folder), "LAKEHOUSE_HA_ETCD_MEMBERS": "3"}
    with run.stack(ha_env, ("--ha", "3"), tag="ha") as ha:
        with run.stack(tag="single") as single:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
                rows = []
                for r in range(a.rounds):  # which goes first alternates, round by round
                    took = {}
                    for name in (("single", "ha") if r % 2 == 0 else ("ha", "single")):
                        took[name] = await bulk(http, (single if name == "single" else ha).gateway,
                                                f"bulk_{r}", a.items)
                    rows.append((r + 1, a.items / took["single"], a.items / took["ha"],
                                 took["single"] / took["ha"]))
        run.table(f"bulk upsert of {a.items} items (384-d, 500 a request), alternating",
                  ["round:d", "single node items/s:.0f", "HA (sync) items/s:.0f", "HA / single:.2f"], rows)
        run.say(f"median HA / single throughput: {statistics.median(r[3] for r in rows):.2f}")
        urls, dsns = cluster.rest_urls(folder), cluster.node_dsns(folder)
        cases = [("postmaster SIGKILL", drill.kill_postmaster(folder), True),
                 ("leader SIGSTOP 25 s", drill.freeze(folder, 25.0), True),
                 ("Patroni SIGKILL", drill.kill_patroni(folder), False),
                 ("switchover", drill.switchover(urls), True)]
        rows = []
        async with aiohttp.ClientSession() as http:
            for n, (name, fault, new_leader) in enumerate(cases):
                load = drill.Load(ha.gateway, f"drill_{n}")
                await load.create(http)
                load.start(http)
                await asyncio.sleep(2.0)
                try:
                    t = await drill.run_case(name, load, http, urls, fault,
                                             expect_new_leader=new_leader)
                finally:
                    await load.stop()
                await drill.wait_replayed(dsns)
                ids = [i for _, i in load.acked]
                lost = set()
                for dsn in dsns:
                    lost |= set(await drill.missing_on(dsn, load.corpus, ids))
                rows.append((name, t.elected, t.writes_back, t.old_back, t.write_gap, t.acked,
                             len(lost), t.write_failures, t.searches, t.searches_failed_during,
                             t.searches_failed_outside))
            final = await drill.cluster_now(http, urls)
    run.table("failover under 4 writers and 8 searchers (seconds after the fault)",
              ["case", "elected:.2f", "writes back:.2f", "old node back:.2f",
               "longest write gap:.2f", "acked:d", "lost:d", "write errors:d", "searches:d",
               "failed during:d", "failed outside:d"], rows)
    run.say("cluster after the run: " + ", ".join(f"{m.name} {m.role} {m.state} tl {m.timeline}"
                                                  for m in final))
    return 0 if patroni.leader(final) is not None else 1
