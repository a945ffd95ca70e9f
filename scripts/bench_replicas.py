"""Benchmark read replicas, backups and restores on the embedded PostgreSQL.

Starts an embedded primary in a temporary folder and one streaming standby of it (made
as `lakehouse up --replicas 1` makes it), loads a corpus of --items items (SciFact text
repeated, random 384-d unit vectors, HNSW built after the load), and prints in one run:

- search p50 / p95 (sequential) and QPS at concurrency 8 of the default hybrid search
  (feedback as shipped) through two vectords, each in its own process: one reading the
  primary alone, one reading the standby (`read_dsns`), in alternating rounds. On two
  cores both share the same CPUs: this measures the replica path's overhead, not scale;
- the standby's replay lag under a write load (4 writers upserting 20 items a call for
  --write-seconds): for each write, the time from its answer to the standby having
  replayed its Lakehouse-LSN, p50 / p99;
- a full backup of the primary (`lakehouse backup`'s code): time and size; its restore
  into a new data directory (`lakehouse restore`'s code): time.

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_replicas.py \
        [--items 100000] [--queries 200] [--rounds 3] [--write-seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_lexical import CONCURRENCY, Server, pct, qps  # noqa: E402

from internal.backup import pgbackup  # noqa: E402
from internal.config import Config  # noqa: E402
from internal.evaluation import beir  # noqa: E402
from internal.stack import postgres  # noqa: E402

C = "/v1/vectors/corpora"
CORPUS = "bench_replicas"
DIM = 384
BATCH = 500


def vectors(n: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return [list(map(float, row)) for row in v]


async def post(http: aiohttp.ClientSession, url: str, body: Any,
               headers: dict[str, str] | None = None) -> tuple[Any, str]:
    async with http.post(url, json=body, headers=headers or {}) as resp:
        data = await resp.json(content_type=None)
        if resp.status >= 300:
            raise RuntimeError(f"{url}: {resp.status} {data}")
        return data, resp.headers.get("Lakehouse-LSN", "")


async def load(http: aiohttp.ClientSession, base: str, docs: list[beir.Doc], total: int) -> float:
    await post(http, f"{base}{C}", {"name": CORPUS, "dim": DIM, "metric": "cosine",
                                    "language": "english", "defer_index": True})
    started = time.perf_counter()
    for start in range(0, total, BATCH):
        n = min(BATCH, total - start)
        vecs = vectors(n, start)
        items = []
        for j in range(n):
            d = docs[(start + j) % len(docs)]
            items.append({"id": f"i{start + j}", "vector": vecs[j], "title": d.title,
                          "text": d.text})
        await post(http, f"{base}{C}/{CORPUS}/items", {"items": items})
    await post(http, f"{base}{C}/{CORPUS}/index", {})
    return time.perf_counter() - started


def search_of(http: aiohttp.ClientSession, base: str, qvecs: dict[str, list[float]]) -> Any:
    async def run(text: str) -> list[str]:
        body, _ = await post(http, f"{base}{C}/{CORPUS}/search", {
            "mode": "hybrid", "query_text": text, "query_vector": qvecs[text], "k": 10})
        return [h["id"] for h in body["hits"]]
    return run


async def replayed(conn: psycopg.AsyncConnection[Any]) -> int:
    from internal.common.lsn import parse_lsn

    cur = await conn.execute("SELECT pg_last_wal_replay_lsn()::text")
    row = await cur.fetchone()
    return parse_lsn(str(row[0])) if row and row[0] else 0


async def lag_under_writes(http: aiohttp.ClientSession, base: str, standby_dsn: str,
                           seconds: float) -> list[float]:
    """Seconds from each write's answer until the standby had replayed its LSN."""
    from internal.common.lsn import parse_lsn

    pending: list[tuple[int, float]] = []
    lags: list[float] = []
    stop = asyncio.Event()
    counter = iter(range(10**9))

    async def writer(w: int) -> None:
        while not stop.is_set():
            k = next(counter)
            items = [{"id": f"w{w}_{k}_{j}", "vector": vec, "text": f"write {k} of writer {w}"}
                     for j, vec in enumerate(vectors(20, 10**6 + k))]
            _, lsn = await post(http, f"{base}{C}/{CORPUS}/items", {"items": items})
            pending.append((parse_lsn(lsn), time.monotonic()))

    async def watcher() -> None:
        async with await psycopg.AsyncConnection.connect(standby_dsn, autocommit=True) as conn:
            while not stop.is_set() or pending:
                pos = await replayed(conn)
                now = time.monotonic()
                still = [(lsn, t) for lsn, t in pending if lsn > pos]
                lags.extend(now - t for lsn, t in pending if lsn <= pos)
                pending[:] = still
                await asyncio.sleep(0.002)

    watch = asyncio.create_task(watcher())
    writers = [asyncio.create_task(writer(w)) for w in range(4)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*writers)
    await watch
    return lags


async def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write-seconds", type=float, default=20.0)
    args = ap.parse_args()
    sf = beir.load(Path(args.data) / "scifact", "train")
    texts = list(sf.queries.values())[:args.queries]
    qvecs = dict(zip(texts, vectors(len(texts), 7), strict=True))
    tmp = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    primary = postgres.start(str(tmp / "pg"))
    standby = postgres.start_standby(primary, 1)
    base_cfg = Config()
    alone = Server("vectord", Config(vectord=type(base_cfg.vectord)(
        dsn=primary.dsn, pool_min=1, pool_max=CONCURRENCY)))
    replica = Server("vectord", Config(vectord=type(base_cfg.vectord)(
        dsn=primary.dsn, pool_min=1, pool_max=CONCURRENCY, read_dsns=(standby.dsn,))))
    try:
        async with aiohttp.ClientSession() as http:
            took = await load(http, alone.base, sf.docs, args.items)
            print(f"loaded {args.items:,} items ({DIM}-d vectors, SciFact text, HNSW after) "
                  f"in {took:.1f} s", flush=True)
            sides = {"primary alone": search_of(http, alone.base, qvecs),
                     "primary + 1 replica (searches on the standby)":
                         search_of(http, replica.base, qvecs)}
            for search in sides.values():  # warm both (caches, HNSW pages)
                for text in texts:
                    await search(text)
            seq: dict[str, list[float]] = {s: [] for s in sides}
            rates: dict[str, list[float]] = {s: [] for s in sides}
            for rnd in range(args.rounds):
                order = list(sides) if rnd % 2 == 0 else list(sides)[::-1]
                for side in order:
                    for text in texts:
                        t0 = time.perf_counter()
                        await sides[side](text)
                        seq[side].append((time.perf_counter() - t0) * 1000)
                    rates[side].append(await qps(sides[side], texts))
            async with http.get(f"{replica.base}/readyz") as resp:
                state = (await resp.json())["components"]["read_replicas"][0]
            print(f"\nDefault hybrid search, {len(texts)} SciFact queries, {args.rounds} rounds "
                  f"alternating; p50 / p95 one at a time, QPS at concurrency {CONCURRENCY} "
                  f"(median of rounds). Two cores: overhead, not scale.\n")
            print("| reads | p50 ms | p95 ms | QPS |")
            print("|---|---:|---:|---:|")
            for side in sides:
                print(f"| {side} | {pct(seq[side], 50):.2f} | {pct(seq[side], 95):.2f} | "
                      f"{statistics.median(rates[side]):.0f} |")
            print(f"(standby: {state['searches']} searches served, state {state['state']})")
            lags = np.array(await lag_under_writes(http, alone.base, standby.dsn,
                                                   args.write_seconds)) * 1000
            print(f"\nReplica lag under writes (4 writers x 20 items a call, "
                  f"{args.write_seconds:g} s, {len(lags)} writes): p50 "
                  f"{np.percentile(lags, 50):.1f} ms, p99 {np.percentile(lags, 99):.1f} ms, "
                  f"max {lags.max():.1f} ms", flush=True)
            async with http.get(f"{alone.base}{C}/{CORPUS}") as resp:
                count = (await resp.json())["count"]
        started = time.perf_counter()
        info = await asyncio.to_thread(pgbackup.take, primary.dsn, tmp / "backup",
                                       source=str(tmp / "pg"))
        backup_s = time.perf_counter() - started
        started = time.perf_counter()
        await asyncio.to_thread(pgbackup.restore, tmp / "backup", tmp / "restored")
        restore_s = time.perf_counter() - started
        print(f"\nBackup of {count:,} items ({info.items:,} counted, {info.corpora} corpora): "
              f"{backup_s:.1f} s, {info.bytes / 2**20:,.0f} MB; restore into a new data "
              f"directory: {restore_s:.1f} s")
    finally:
        replica.stop()
        alone.stop()
        postgres.stop(standby)
        postgres.stop(primary)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(asyncio.run(main()))
