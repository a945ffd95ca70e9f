"""Benchmark failover of `lakehouse up --ha 3` and the cost of synchronous replication.

Starts two stacks on free ports, each as `lakehouse up` runs it: one with `--ha 3`
(etcd x3, Patroni x3 over the embedded PostgreSQL 18, synchronous_mode on) and one with
the single embedded server. Prints in one run:

- write throughput: a bulk upsert of --items items (384-d vectors and text, batches of
  500, through the gateway) into a new corpus of each stack, in alternating rounds, and
  the ratio HA / single node per round (synchronous replication waits for a standby's
  flush at every commit);
- the timeline of each failure under 4 writers and 8 searchers (tests/ha/drill.py):
  fault -> new leader elected -> first write accepted again -> old node streaming as a
  replica, with writes acknowledged, writes lost (acknowledged but missing on a node:
  must be 0) and searches failed.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_failover.py [--items 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.ha import patroni  # noqa: E402
from internal.stack import cluster  # noqa: E402
from tests.ha import drill  # noqa: E402
from tests.stack import upstack  # noqa: E402

C = "/v1/vectors/corpora"
DIM = 384
BATCH = 500


async def bulk(http: aiohttp.ClientSession, url: str, corpus: str, items: int) -> float:
    """Seconds to upsert `items` items into a new corpus, BATCH a request."""
    async with http.post(f"{url}{C}", json={"name": corpus, "dim": DIM,
                                            "language": "english"}) as resp:
        assert resp.status in (200, 201), await resp.text()
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    for start in range(0, items, BATCH):
        vecs = rng.standard_normal((min(BATCH, items - start), DIM)).astype(np.float32)
        body = {"items": [{"id": f"i{start + j}", "vector": [float(x) for x in v],
                           "text": f"bulk item {start + j} of the failover bench"}
                          for j, v in enumerate(vecs)]}
        async with http.post(f"{url}{C}/{corpus}/items", json=body) as resp:
            assert resp.status == 200, await resp.text()
    return time.perf_counter() - started


async def bench(args: argparse.Namespace, ha: upstack.Stack, single: upstack.Stack,
                folder: Path) -> int:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
        print(f"## bulk upsert of {args.items} items ({DIM}-d, {BATCH} a request), "
              "alternating\n")
        print("| round | single node items/s | HA (sync) items/s | HA / single |")
        print("|---|---|---|---|")
        ratios = []
        for r in range(args.rounds):
            if r % 2 == 0:  # which goes first alternates, round by round
                one = await bulk(http, single.url, f"bulk_{r}", args.items)
                two = await bulk(http, ha.url, f"bulk_{r}", args.items)
            else:
                two = await bulk(http, ha.url, f"bulk_{r}", args.items)
                one = await bulk(http, single.url, f"bulk_{r}", args.items)
            ratios.append(one / two)
            print(f"| {r + 1} | {args.items / one:.0f} | {args.items / two:.0f} "
                  f"| {one / two:.2f} |", flush=True)
        print(f"\nmedian HA / single throughput: {statistics.median(ratios):.2f}\n")
    await asyncio.to_thread(single.stop)
    urls, dsns = cluster.rest_urls(folder), cluster.node_dsns(folder)
    cases: list[tuple[str, drill.Fault, bool]] = [
        ("postmaster SIGKILL", drill.kill_postmaster(folder), True),
        ("leader SIGSTOP 25 s", drill.freeze(folder, 25.0), True),
        ("Patroni SIGKILL", drill.kill_patroni(folder), False),
        ("switchover", drill.switchover(urls), True),
    ]
    print("## failover under 4 writers and 8 searchers (seconds after the fault)\n")
    print("| case | elected | writes back | old node back | longest write gap "
          "| acked | lost | write errors | searches | failed during | failed outside |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    async with aiohttp.ClientSession() as http:
        for n, (name, fault, new_leader) in enumerate(cases):
            load = drill.Load(ha.url, f"drill_{n}")
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

            def f(v: float | None) -> str:
                return "-" if v is None else f"{v:.2f}"
            print(f"| {name} | {f(t.elected)} | {f(t.writes_back)} | {f(t.old_back)} "
                  f"| {f(t.write_gap)} | {t.acked} | {len(lost)} | {t.write_failures} "
                  f"| {t.searches} | {t.searches_failed_during} "
                  f"| {t.searches_failed_outside} |", flush=True)
        final = await drill.cluster_now(http, urls)
    print("\ncluster after the run: " + ", ".join(
        f"{m.name} {m.role} {m.state} tl {m.timeline}" for m in final))
    return 0 if patroni.leader(final) is not None else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    base.chmod(0o755)  # Patroni and PostgreSQL run as the server's own user under root
    folder = base / "ha"
    ha = upstack.start("bench-failover-ha-", args=("--ha", "3"), env_extra={
        "LAKEHOUSE_HA_DATA_DIR": str(folder), "LAKEHOUSE_HA_ETCD_MEMBERS": "3"})
    single = upstack.start("bench-failover-single-")
    try:
        return asyncio.run(bench(args, ha, single, folder))
    finally:
        single.stop()
        ha.stop()
        for tmp in (base, ha.tmp, single.tmp):  # three nodes' WAL and two stacks: gigabytes
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
