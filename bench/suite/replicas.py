"""Read replicas, backups and restores on the embedded PostgreSQL.

An embedded primary and one streaming standby of it (as `lakehouse up --replicas 1`
makes it), a corpus of --items items (SciFact text repeated, random 384-d unit vectors,
HNSW built after the load); then: the default hybrid search's p50 / p95 (sequential) and
QPS at concurrency 8 through two vectords, each in its own process: one reading the
primary alone, one reading the standby (`read_dsns`), in alternating rounds (on two cores
both share the CPUs: the replica path's overhead, not scale); the standby's replay lag
under 4 writers upserting 20 items a call for --write-seconds (from each write's answer
to the standby having replayed its Lakehouse-LSN), p50 / p99; a full backup of the primary
(`lakehouse backup`'s code) and its restore into a new data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

import aiohttp
import numpy as np
import psycopg

from bench.harness import Run
from bench.harness.http import CORPORA, call, post
from bench.harness.stacks import daemon
from bench.harness.timing import alternated, ms, pct, qps
from internal.backup import pgbackup
from internal.common.lsn import parse_lsn
from internal.evaluation import beir
from internal.stack import postgres

OPTIONS = {"items": 100_000, "queries": 200, "rounds": 3, "write_seconds": 20.0}
QUICK = {"items": 10_000, "queries": 60, "rounds": 2, "write_seconds": 5.0}
CORPUS, DIM, URL = "bench_replicas", 384, f"{CORPORA}/bench_replicas"


def vectors(n: int, seed: int) -> list[list[float]]:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).tolist()  # type: ignore[no-any-return]


async def lag_under_writes(http: aiohttp.ClientSession, base: str, standby: str, seconds: float
                           ) -> list[float]:
    """Seconds from each write's answer until the standby had replayed its LSN."""
    pending: list[tuple[int, float]] = []
    lags: list[float] = []
    stop, counter = asyncio.Event(), iter(range(10**9))

    async def writer(w: int) -> None:
        while not stop.is_set():
            k = next(counter)
            items = [{"id": f"w{w}_{k}_{j}", "vector": v, "text": f"write {k} of writer {w}"}
                     for j, v in enumerate(vectors(20, 10**6 + k))]
            async with http.post(f"{base}{URL}/items", json={"items": items}) as r:
                await r.read()
                pending.append((parse_lsn(r.headers.get("Lakehouse-LSN", "")), time.monotonic()))

    async def watcher() -> None:
        async with await psycopg.AsyncConnection.connect(standby, autocommit=True) as conn:
            while not stop.is_set() or pending:
                row = await (await conn.execute("SELECT pg_last_wal_replay_lsn()::text")).fetchone()
                pos, now = parse_lsn(str(row[0])) if row and row[0] else 0, time.monotonic()
                lags.extend(now - t for lsn, t in pending if lsn <= pos)
                pending[:] = [(lsn, t) for lsn, t in pending if lsn > pos]
                await asyncio.sleep(0.002)

    watch = asyncio.create_task(watcher())
    writers = [asyncio.create_task(writer(w)) for w in range(4)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*writers, watch)
    return lags


async def main(run: Run) -> None:
    a = run.args
    sf = beir.load(run.need("data", "scifact"), "train")
    texts = list(sf.queries.values())[:a.queries]
    qvecs = dict(zip(texts, vectors(len(texts), 7), strict=True))
    primary = postgres.start(str(run.folder / "pg"))
    standby = postgres.start_standby(primary, 1)
    env = {"LAKEHOUSE_VECTORD_DSN": primary.dsn, "LAKEHOUSE_VECTORD_POOL_MIN": "1",
           "LAKEHOUSE_VECTORD_POOL_MAX": "8", "LAKEHOUSE_LOG_LEVEL": "info"}
    try:
        with contextlib.ExitStack() as held:
            alone = held.enter_context(daemon("vectord", env, path="/readyz"))
            replica = held.enter_context(daemon("vectord", {**env, "LAKEHOUSE_VECTORD_READ_DSNS": standby.dsn},
                                                path="/readyz"))
            async with aiohttp.ClientSession() as http:
                t0 = time.perf_counter()
                await post(http, f"{alone.base}{CORPORA}", {"name": CORPUS, "dim": DIM, "metric": "cosine",
                                                            "language": "english", "defer_index": True})
                for start in range(0, a.items, 500):
                    vecs = vectors(min(500, a.items - start), start)
                    await post(http, f"{alone.base}{URL}/items", {"items": [
                        {"id": f"i{start + j}", "vector": v, "title": sf.docs[(start + j) % len(sf.docs)].title,
                         "text": sf.docs[(start + j) % len(sf.docs)].text} for j, v in enumerate(vecs)]})
                await post(http, f"{alone.base}{URL}/index", {})
                run.say(f"loaded {a.items:,} items ({DIM}-d vectors, SciFact text, HNSW after) in "
                        f"{time.perf_counter() - t0:.1f} s")

                def searcher(base: str) -> Any:
                    return lambda text: post(http, f"{base}{URL}/search", {
                        "mode": "hybrid", "query_text": text, "query_vector": qvecs[text], "k": 10})
                sides = {"primary alone": searcher(alone.base),
                         "primary + 1 replica (searches on the standby)": searcher(replica.base)}
                for fn in sides.values():  # warm both (caches, HNSW pages)
                    for text in texts:
                        await fn(text)
                seq: dict[str, list[float]] = {s: [] for s in sides}
                rates: dict[str, list[float]] = {s: [] for s in sides}
                for rnd in range(a.rounds):
                    for side in alternated(list(sides), rnd):
                        seq[side] += [await ms(sides[side](t)) for t in texts]
                        rates[side].append(await qps(sides[side], texts, 8))
                state = (await call(http, "GET", f"{replica.base}/readyz"))["components"]["read_replicas"][0]
                run.table(f"Default hybrid search, {len(texts)} SciFact queries, {a.rounds} rounds alternating; "
                          "p50 / p95 one at a time, QPS at concurrency 8 (median of rounds)",
                          ["reads", "p50 ms:.2f", "p95 ms:.2f", "QPS:.0f"],
                          [(s, pct(seq[s], 50), pct(seq[s], 95), statistics.median(rates[s])) for s in sides])
                run.say(f"(standby: {state['searches']} searches served, state {state['state']})")
                lags = np.array(await lag_under_writes(http, alone.base, standby.dsn, a.write_seconds)) * 1000
                run.say(f"Replica lag under writes (4 writers x 20 items a call, {a.write_seconds:g} s, "
                        f"{len(lags)} writes): p50 {np.percentile(lags, 50):.1f} ms, p99 "
                        f"{np.percentile(lags, 99):.1f} ms, max {lags.max():.1f} ms")
                count = (await call(http, "GET", f"{alone.base}{URL}"))["count"]
        started = time.perf_counter()
        info = await asyncio.to_thread(pgbackup.take, primary.dsn, run.folder / "backup",
                                       source=str(run.folder / "pg"))
        backup_s, started = time.perf_counter() - started, time.perf_counter()
        await asyncio.to_thread(pgbackup.restore, run.folder / "backup", run.folder / "restored")
        run.say(f"Backup of {count:,} items ({info.items:,} counted, {info.corpora} corpora): "
                f"{backup_s:.1f} s, {info.bytes / 2**20:,.0f} MB; restore into a new data directory: "
                f"{time.perf_counter() - started:.1f} s")
    finally:
        postgres.stop(standby)
        postgres.stop(primary)
