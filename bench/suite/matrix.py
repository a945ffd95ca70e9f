"""matrixd's fan-out: p50 search latency over 1, 4 and 8 corpora of 10,000 items.

vectord (an embedded PostgreSQL of its own) and matrixd as processes; L2-normalised 384-d
vectors (clustered like real embeddings; --vectors uniform for HNSW's worst case) loaded
through vectord's API; matrixd asked by vector (the model is not measured). Each setup's
p50/p95 and its ratio to 1 corpus, next to vectord asked directly, a serial fan-out (one
corpus after another) and, as the floor, vectord's SQL sent straight to PostgreSQL: to 1
corpus, and to the 8 at once on 8 connections. With --baseline the baseline's matrixd and
vectord on the same data, alternating slices of 25 queries.

Target: 8 corpora / 1 corpus p50 <= 2x (the fan-out is parallel, not serial).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.harness import Run
from bench.harness.http import CORPORA, post, session
from bench.harness.stacks import daemon
from bench.harness.timing import median, ms, pct
from bench.peers.floors import DirectSearch
from internal.config import VectordConfig
from internal.pg import embedded
from internal.pg.pool import make_pool

OPTIONS = {"items": (10_000, "items a corpus"), "queries": 200, "vectors": ("mixture", "or uniform")}
QUICK = {"items": 2000, "queries": 60}
DIM = 384


def vectors(kind: str, n: int, seed: int) -> npt.NDArray[np.float32]:
    """n unit vectors: 'mixture' (1,000 centres shared by every corpus and the queries) or
    'uniform' on the sphere."""
    rng = np.random.default_rng(seed)
    if kind == "mixture":
        centres = np.random.default_rng(42).standard_normal((1000, DIM)).astype(np.float32)
        v = centres[rng.integers(0, 1000, size=n)] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    else:
        v = rng.standard_normal((n, DIM)).astype(np.float32)
    out: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


async def seq(fn: Any, bodies: list[Any], warmup: int = 10) -> tuple[float, float]:
    for b in bodies[:warmup]:
        await fn(b)
    times = [await ms(fn(b)) for b in bodies]
    return median(times), pct(times, 95)


async def main(run: Run) -> None:
    a = run.args
    names = [f"bench_mx_{i}" for i in range(8)]
    pg = embedded.start(run.folder / "pg")
    try:
        with contextlib.ExitStack() as held:
            pairs = {}
            for side, root in run.roots().items():
                vd = held.enter_context(daemon("vectord", {"LAKEHOUSE_PG_DSN": pg.dsn,
                                                           "LAKEHOUSE_LOG_LEVEL": "warning"}, root))
                md = held.enter_context(daemon("matrixd", {
                    "LAKEHOUSE_MATRIXD_VECTORD_URL": vd.base, "LAKEHOUSE_MATRIXD_EMBEDD_URL": "",
                    "LAKEHOUSE_LOG_LEVEL": "warning"}, root))
                pairs[side] = (vd.base, md.base)
            vurl, murl = pairs["this"]
            async with session(16, 600) as s:
                everything = vectors(a.vectors, a.items * 8, seed=7)
                gate = asyncio.Semaphore(2)
                t0 = time.perf_counter()

                async def fill(i: int, name: str) -> None:
                    async with gate:  # one upsert stream per core
                        await post(s, f"{vurl}{CORPORA}", {"name": name, "dim": DIM, "language": "english",
                                                           "defer_index": True})
                        vecs = everything[i * a.items:(i + 1) * a.items]
                        for lo in range(0, a.items, 1000):
                            await post(s, f"{vurl}{CORPORA}/{name}/items", {"items": [
                                {"id": f"{name}-{j}", "vector": vecs[j].tolist(), "text": f"item {j}",
                                 "metadata": {"i": j}} for j in range(lo, min(lo + 1000, a.items))]})
                        await post(s, f"{vurl}{CORPORA}/{name}/index", {})
                await asyncio.gather(*(fill(i, n) for i, n in enumerate(names)))
                load_s = time.perf_counter() - t0
                queries = [v.tolist() for v in vectors(a.vectors, a.queries, seed=8)]

                def bodies(n: int) -> list[dict[str, Any]]:
                    return [{"mode": "vector", "query_vector": v, "k": 10, "corpora": names[:n]}
                            for v in queries]

                def to(url: str) -> Any:
                    return lambda b: post(s, url, b)

                rows = [("vectord direct, 1 corpus", *await seq(to(f"{vurl}{CORPORA}/{names[0]}/search"),
                                                                 bodies(1)))]
                for n in (1, 4, 8):
                    rows.append((f"matrixd, {n} corpora", *await seq(to(f"{murl}/v1/matrix/search"), bodies(n))))

                async def serial(b: dict[str, Any]) -> None:
                    for name in names:
                        await post(s, f"{vurl}{CORPORA}/{name}/search",
                                   {k: v for k, v in b.items() if k != "corpora"})
                rows.append(("serial fan-out (reference)", *await seq(serial, bodies(1), 0)))
                rows += await direct_sql(pg.dsn, names, queries)
                compared = []
                if "baseline" in pairs:
                    for n in (1, 8):
                        mine: list[float] = []
                        theirs: list[float] = []
                        for lo in range(0, a.queries, 25):  # alternating slices of 25
                            for b in bodies(n)[lo:lo + 25]:
                                mine.append(await ms(post(s, f"{murl}/v1/matrix/search", b)))
                            for b in bodies(n)[lo:lo + 25]:
                                theirs.append(await ms(post(s, f"{pairs['baseline'][1]}/v1/matrix/search", b)))
                        compared.append((f"{n} corpora", median(mine), median(theirs),
                                         median(mine) / median(theirs)))
    finally:
        pg.stop()
    one = rows[1][1]
    run.table(f"load: {8 * a.items} vectors in {load_s:.1f} s; {a.queries} sequential queries a row, k=10",
              ["setup", "p50 ms:.2f", "p95 ms:.2f", "p50 / 1 corpus:.2f"], [(*r, r[1] / one) for r in rows])
    ratio = rows[3][1] / one
    run.say(f"floor: PostgreSQL alone, 8 corpora at once / 1 corpus = {rows[6][1] / rows[5][1]:.2f}x")
    run.say(f"8 corpora / 1 corpus p50 = {ratio:.2f}x ({'meets' if ratio <= 2 else 'misses'} the <= 2x target)",
            fanout_ratio=ratio)
    if compared:
        run.table(f"this checkout vs baseline {run.baseline} (alternating slices of 25 queries)",
                  ["matrixd", "this p50 ms:.2f", "baseline p50 ms:.2f", "this / baseline:.2f"], compared)


async def direct_sql(dsn: str, names: list[str], queries: list[list[float]]) -> list[tuple[Any, ...]]:
    """p50/p95 of vectord's SQL sent straight to PostgreSQL: 1 corpus, then 8 at once."""
    ef = VectordConfig().ef_search
    pool = make_pool(dsn, len(names), len(names))
    await pool.open(wait=True)
    try:
        direct = DirectSearch(pool)
        stmts = {name: await direct.statement(name) for name in names}
        qs = [np.asarray(v, dtype=np.float32) for v in queries]
        rows = []
        for n in (1, 8):
            async def all_at_once(q: npt.NDArray[np.float32], n: int = n) -> None:
                await asyncio.gather(*(direct.run(stmts[name], q, 10, ef) for name in names[:n]))
            rows.append((f"floor: SQL direct, {n} corpora", *await seq(all_at_once, qs)))
        return rows
    finally:
        await pool.close()
