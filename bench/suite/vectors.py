"""vectord against the same SQL sent directly with psycopg, and a bare aiohttp floor.

N vectors (a Gaussian mixture, bench/data/vectors.py) loaded into a fresh embedded
PostgreSQL through vectord's HTTP API with the HNSW index deferred, the index built; then
load and build seconds, recall@10 against exact numpy search (at the default ef_search,
and a small ef sweep), p50/p95 of vectord's HTTP search and of the same query sent
directly, and QPS at concurrency 8 for both, with ratios. A reference row does the same
through a bare aiohttp handler that runs vectord's SQL and nothing else
(bench/peers/floors.py): the floor of an aiohttp service here, in the same run.

Targets: p50 <= 1.5x direct SQL; QPS >= 0.6x.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.data.vectors import exact_top, item_id, mixture, recall
from bench.harness import Run
from bench.harness.http import CORPORA, post, session
from bench.harness.stacks import daemon
from bench.harness.timing import one_at_a_time, pct, qps
from bench.peers.floors import DirectSearch, floor
from internal.config import VectordConfig
from internal.pg import embedded
from internal.pg.pool import make_pool

OPTIONS = {"n": 100_000, "dim": 384, "centres": 1000, "queries": 200, "seed": 42}
QUICK = {"n": 10_000, "queries": 100}
NAME, K = "bench_vectors", 10


async def main(run: Run) -> None:
    a, cfg = run.args, VectordConfig()
    data = mixture(a.n + a.queries, a.dim, a.centres, a.seed)
    queries, data = data[:a.queries], data[a.queries:]
    truth = exact_top(data, queries, K)
    pg = embedded.start(run.folder / "pg")
    try:
        with daemon("vectord", {"LAKEHOUSE_PG_DSN": pg.dsn}, path="/readyz") as vd:
            async with session(16) as http:
                base = f"{vd.base}{CORPORA}"
                await post(http, base, {"name": NAME, "dim": a.dim, "metric": "cosine",
                                         "language": "english", "model": "bench", "defer_index": True})
                gate = asyncio.Semaphore(2)  # batches of 1,000, two in flight

                async def load(start: int) -> None:
                    rows = data[start:start + 1000]
                    async with gate:
                        await post(http, f"{base}/{NAME}/items", {"model": "bench", "items": [
                            {"id": item_id(start + i), "vector": rows[i].tolist(),
                             "text": f"point {start + i}"} for i in range(len(rows))]})
                t = time.perf_counter()
                await asyncio.gather(*(load(s) for s in range(0, a.n, 1000)))
                load_s, t = time.perf_counter() - t, time.perf_counter()
                await post(http, f"{base}/{NAME}/index", {})
                build_s = time.perf_counter() - t
                pool = make_pool(pg.dsn, 1, 8)
                await pool.open(wait=True)
                direct_search = DirectSearch(pool)
                corpus = await direct_search.corpus(NAME)
                async with pool.connection() as conn:
                    await conn.execute(f"VACUUM ANALYZE vectord_items_{corpus.id}")
                stmt = await direct_search.statement(NAME)
                qlists = [q.tolist() for q in queries]

                async def direct(i: int, ef: int = cfg.ef_search) -> list[dict[str, Any]]:
                    return await direct_search.run(stmt, queries[i % len(queries)], K, ef)

                async def via_http(i: int) -> Any:
                    return await post(http, f"{base}/{NAME}/search", {
                        "mode": "vector", "query_vector": qlists[i % len(qlists)], "k": K})

                with floor("search", "--dsn", pg.dsn, "--corpus", NAME, "--ef-search",
                           str(cfg.ef_search)) as f:
                    async def via_floor(i: int) -> Any:
                        return await post(http, f"{f}/search", {"query_vector": qlists[i % len(qlists)], "k": K})

                    answers = [await via_http(i) for i in range(len(queries))]
                    recall_default = recall([[h["id"] for h in x["hits"]] for x in answers], truth)
                    sweep = {ef: recall([[r["id"] for r in await direct(i, ef)]
                                         for i in range(len(queries))], truth)
                             for ef in (20, 40, 64, 100, 200)}
                    paths = {"http": via_http, "floor": via_floor, "sql": direct}
                    for fn in paths.values():
                        await one_at_a_time(fn, range(50))
                    lat = {p: await one_at_a_time(fn, range(a.queries * 2)) for p, fn in paths.items()}
                    for fn in paths.values():  # pools grown, statements prepared
                        await qps(fn, range(a.queries), 8)
                    rate = {p: await qps(fn, range(a.queries * 4), 8) for p, fn in paths.items()}
                await pool.close()
    finally:
        pg.stop()
    p50 = {p: pct(x, 50) for p, x in lat.items()}
    p95 = {p: pct(x, 95) for p, x in lat.items()}
    run.table(f"data: {a.n} x {a.dim}, {a.centres} centres, seed {a.seed}; {a.queries} queries; "
              f"hnsw m={cfg.hnsw_m} ef_construction={cfg.hnsw_ef_construction}",
              ["measure", "vectord (HTTP):.4g", "direct SQL (psycopg):.4g", "ratio:.2f"], [
                  (f"load {a.n} vectors (s), HNSW deferred", load_s, None, None),
                  ("HNSW build (s)", build_s, None, None),
                  (f"recall@10 at default ef_search={cfg.ef_search}", recall_default,
                   sweep.get(cfg.ef_search), None),
                  ("p50 latency (ms)", p50["http"], p50["sql"], p50["http"] / p50["sql"]),
                  ("p95 latency (ms)", p95["http"], p95["sql"], p95["http"] / p95["sql"]),
                  ("QPS at concurrency 8", rate["http"], rate["sql"], rate["http"] / rate["sql"]),
                  ("floor: bare aiohttp + same SQL, p50 (ms)", p50["floor"], p50["sql"],
                   p50["floor"] / p50["sql"]),
                  ("floor: bare aiohttp + same SQL, QPS at 8", rate["floor"], rate["sql"],
                   rate["floor"] / rate["sql"])])
    run.say("recall@10 by ef_search (direct SQL): " + ", ".join(f"{ef}: {r:.4f}" for ef, r in sweep.items()))
    run.series("recall by ef_search (vectord, direct SQL)", [[ef, r] for ef, r in sweep.items()])
