"""Benchmark vectord against the same SQL sent directly with psycopg.

Loads N vectors (default 100,000 x 384: a Gaussian mixture of 1,000 centres, fixed seed,
L2-normalised) into a fresh embedded PostgreSQL through vectord's HTTP API with the
HNSW index deferred, builds the index, then prints: load and build seconds, recall@10
against exact numpy search (at the default ef_search, and a small ef sweep), p50/p95
latency of vectord's HTTP search and of the same query sent directly, and QPS at
concurrency 8 for both, with ratios. A reference row does the same through a bare
aiohttp handler that runs vectord's SQL and nothing else (scripts/bench_floors.py): the
floor of an aiohttp service on this machine, measured in the same run.

    .venv/bin/python scripts/bench_vectors.py [--n 100000] [--dim 384] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from psycopg_pool import AsyncConnectionPool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_data import exact_top, free_port, mixture, pct, qps, terminate  # noqa: E402
from bench_floors import DirectSearch  # noqa: E402

from internal.config import VectordConfig  # noqa: E402
from internal.pg import embedded  # noqa: E402
from internal.pg.pool import make_pool  # noqa: E402
from internal.vectord.storage.filters import TRUE  # noqa: E402
from internal.vectord.storage.store import vector_search_sql  # noqa: E402

C = "/v1/vectors/corpora"
NAME = "bench_vectors"
enc = msgspec.json.Encoder()
dec = msgspec.json.Decoder()  # as internal.clients.base decodes daemon answers


async def timed(n: int, fn: Callable[[int], Awaitable[Any]]) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        await fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


async def wait_ready(http: aiohttp.ClientSession, base: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"vectord exited with {proc.returncode}")
        try:
            async with http.get(f"{base}/readyz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("vectord not ready after 60 s")


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with http.post(url, data=enc.encode(body),
                         headers={"Content-Type": "application/json"}) as resp:
        out = dec.decode(await resp.read())
        if resp.status >= 400:
            raise SystemExit(f"{url}: {resp.status} {out}")
        return out


def start_floor(dsn: str, port: int, ef_search: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(ROOT / "scripts" / "bench_floors.py"), "search",
                             "--dsn", dsn, "--corpus", NAME, "--port", str(port),
                             "--ef-search", str(ef_search)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_vectord(dsn: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LAKEHOUSE_PG_DSN": dsn, "LAKEHOUSE_VECTORD_PORT": str(port),
           "LAKEHOUSE_LOG_FORMAT": "json", "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml")}
    return subprocess.Popen([sys.executable, "-m", "internal.vectord.server"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run(args: argparse.Namespace, dsn: str, base: str,
              proc: subprocess.Popen[bytes]) -> None:
    k = 10
    cfg = VectordConfig()
    print(f"data: {args.n} x {args.dim}, {args.centres} centres, seed {args.seed}; "
          f"{args.queries} queries; hnsw m={cfg.hnsw_m} ef_construction={cfg.hnsw_ef_construction}")
    data = mixture(args.n + args.queries, args.dim, args.centres, args.seed)
    queries, data = data[: args.queries], data[args.queries:]
    truth = exact_top(data, queries, k)
    pool: AsyncConnectionPool | None = None
    floor: subprocess.Popen[bytes] | None = None
    try:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=32),
                timeout=aiohttp.ClientTimeout(total=3600)) as http:
            await wait_ready(http, base, proc)
            await post(http, f"{base}{C}", {"name": NAME, "dim": args.dim, "metric": "cosine",
                                            "language": "english", "model": "bench",
                                            "defer_index": True})
            # Load: batches of 1,000 through HTTP, two in flight.
            batches = range(0, args.n, 1000)
            sem = asyncio.Semaphore(2)

            async def load(start: int) -> None:
                rows = data[start:start + 1000]
                items = [{"id": f"p{start + i:07d}", "vector": rows[i].tolist(),
                          "text": f"point {start + i}"} for i in range(len(rows))]
                async with sem:
                    await post(http, f"{base}{C}/{NAME}/items", {"items": items, "model": "bench"})

            t = time.perf_counter()
            await asyncio.gather(*(load(s) for s in batches))
            load_s = time.perf_counter() - t
            t = time.perf_counter()
            await post(http, f"{base}{C}/{NAME}/index", {})
            build_s = time.perf_counter() - t

            pool = make_pool(dsn, 1, 8)
            await pool.open(wait=True)
            direct_search = DirectSearch(pool)
            corpus = await direct_search.corpus(NAME)
            async with pool.connection() as conn:
                await conn.execute("VACUUM ANALYZE " + f"vectord_items_{corpus.id}")
            stmt = vector_search_sql(corpus, TRUE)
            qlists = [q.tolist() for q in queries]

            async def direct(i: int, ef: int = cfg.ef_search) -> list[dict[str, Any]]:
                return await direct_search.run(stmt, queries[i % len(queries)], k, ef)

            floor_port = free_port()
            floor = start_floor(dsn, floor_port, cfg.ef_search)
            floor_url = f"http://127.0.0.1:{floor_port}/search"
            for _ in range(300):
                try:
                    async with http.post(floor_url, json={"query_vector": qlists[0], "k": k}) as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.1)

            async def via_floor(i: int) -> Any:
                return await post(http, floor_url, {"query_vector": qlists[i % len(qlists)], "k": k})

            async def via_http(i: int) -> Any:
                return await post(http, f"{base}{C}/{NAME}/search",
                                  {"mode": "vector", "query_vector": qlists[i % len(qlists)], "k": k})

            def recall(found: list[list[str]]) -> float:
                hits = 0
                for i, ids in enumerate(found):
                    want = {f"p{j:07d}" for j in truth[i]}
                    hits += len(want & set(ids))
                return hits / (len(found) * k)

            # Recall at the default ef_search, through vectord itself.
            answers = [await via_http(i) for i in range(len(queries))]
            recall_default = recall([[h["id"] for h in a["hits"]] for a in answers])
            sweep = {}
            for ef in (20, 40, 64, 100, 200):
                found = [[r["id"] for r in await direct(i, ef)] for i in range(len(queries))]
                sweep[ef] = recall(found)

            # Warm every path, then latency one at a time, then QPS at concurrency 8.
            await timed(50, via_http)
            await timed(50, via_floor)
            await timed(50, direct)
            lat_http = await timed(args.queries * 2, via_http)
            lat_floor = await timed(args.queries * 2, via_floor)
            lat_sql = await timed(args.queries * 2, direct)
            total = args.queries * 4
            for fn in (via_http, via_floor, direct):  # pools grown, statements prepared
                await qps(args.queries, 8, fn)
            qps_http = await qps(total, 8, via_http)
            qps_floor = await qps(total, 8, via_floor)
            qps_sql = await qps(total, 8, direct)
    finally:
        if pool is not None:
            await pool.close()
        if floor is not None:
            floor.terminate()
            floor.wait(timeout=30)

    print()
    print("| measure | vectord (HTTP) | direct SQL (psycopg) | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| load {args.n} vectors (s), HNSW deferred | {load_s:.1f} | | |")
    print(f"| HNSW build (s) | {build_s:.1f} | | |")
    print(f"| recall@10 at default ef_search={cfg.ef_search} | {recall_default:.4f} | "
          f"{sweep[cfg.ef_search] if cfg.ef_search in sweep else float('nan'):.4f} | |")
    p50h, p50s = pct(lat_http, 50), pct(lat_sql, 50)
    p95h, p95s = pct(lat_http, 95), pct(lat_sql, 95)
    print(f"| p50 latency (ms) | {p50h:.2f} | {p50s:.2f} | {p50h / p50s:.2f}x (target <= 1.5x) |")
    print(f"| p95 latency (ms) | {p95h:.2f} | {p95s:.2f} | {p95h / p95s:.2f}x |")
    print(f"| QPS at concurrency 8 | {qps_http:.0f} | {qps_sql:.0f} | "
          f"{qps_http / qps_sql:.2f}x (target >= 0.6x) |")
    f50 = pct(lat_floor, 50)
    print(f"| floor: bare aiohttp + same SQL, p50 (ms) | {f50:.2f} | {p50s:.2f} | "
          f"{f50 / p50s:.2f}x |")
    print(f"| floor: bare aiohttp + same SQL, QPS at 8 | {qps_floor:.0f} | {qps_sql:.0f} | "
          f"{qps_floor / qps_sql:.2f}x |")
    print()
    print("recall@10 by ef_search (direct SQL): "
          + ", ".join(f"{ef}: {r:.4f}" for ef, r in sweep.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centres", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="lakehouse-bench-vectors-")
    pg = embedded.start(Path(tmp) / "pg")
    port = free_port()
    proc = start_vectord(pg.dsn, port)
    try:
        asyncio.run(run(args, pg.dsn, f"http://127.0.0.1:{port}", proc))
    finally:
        terminate(proc)
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
