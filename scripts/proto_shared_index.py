"""Prototype: the vector branch over many corpora, per-corpus tables vs one shared index.

Measures, on one embedded PostgreSQL and the same vectors, the statements a hybrid
search's vector branch runs (top `candidates` by cosine distance, ef_search = candidates):

  per-corpus tables (today's storage): one HNSW table per corpus
    one      the 8,041 vectors as one corpus (one table, one statement)
    16 conc  the same vectors as 16 corpora split by a hash of the id: 16 statements, run
             concurrently on 8 pooled connections (what vectord does), merged by distance
    16 union the 16 tables in ONE statement (UNION ALL of 16 ordered index scans)
  shared table (the candidate): every corpus of the space in one table, corpus a column,
    one HNSW graph
    all      every corpus: one statement, no filter
    half     8 of the 16 corpora: corpus_id = ANY(...), iterative scan (relaxed order)
  one small corpus (1/16 of the data) beside a large space (--big more vectors):
    own table     its own HNSW table (today)
    filtered      the shared table's HNSW with corpus_id = ..., iterative scan
    exact         the shared table, its rows by a btree on corpus_id, exact distances
    partial       a partial HNSW index of the shared table WHERE corpus_id = ...

Each figure is the median over the queries of one search's wall time from this client
(psycopg async, one connection per statement as vectord). The systems alternate query
by query. Recall@candidates against exact search is printed for the shared variants.

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/proto_shared_index.py \
        [--docs 8041] [--big 50000] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_matrix import vectors  # noqa: E402

from internal.pg import embedded  # noqa: E402

DIM = 384
PARTS = 16


def part_of(i: int) -> int:
    return hashlib.sha256(f"d{i}".encode()).digest()[0] % PARTS


async def configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)


async def copy_rows(conn: AsyncConnection, table: str, rows: list[tuple[int, str, npt.NDArray[np.float32]]],
                    with_corpus: bool) -> None:
    cols = "(corpus_id, id, embedding)" if with_corpus else "(id, embedding)"
    async with conn.cursor().copy(f"COPY {table} {cols} FROM STDIN") as cp:
        for cid, item_id, v in rows:
            vec = "[" + ",".join(f"{x:.6f}" for x in v) + "]"
            await cp.write_row((cid, item_id, vec) if with_corpus else (item_id, vec))


async def load(dsn: str, docs: npt.NDArray[np.float32], big: npt.NDArray[np.float32]) -> None:
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        rows = [(part_of(i), f"d{i}", v) for i, v in enumerate(docs)]
        t0 = time.perf_counter()
        await conn.execute(f"CREATE TABLE one (id text PRIMARY KEY, embedding vector({DIM}))")
        await copy_rows(conn, "one", [(0, r[1], r[2]) for r in rows], False)
        await conn.execute("CREATE INDEX ON one USING hnsw (embedding vector_cosine_ops)")
        for p in range(PARTS):
            await conn.execute(f"CREATE TABLE part{p} (id text PRIMARY KEY, embedding vector({DIM}))")
            await copy_rows(conn, f"part{p}", [r for r in rows if r[0] == p], False)
            await conn.execute(f"CREATE INDEX ON part{p} USING hnsw (embedding vector_cosine_ops)")
        print(f"per-corpus tables loaded and indexed in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        await conn.execute(f"""CREATE TABLE space (corpus_id int NOT NULL, id text NOT NULL,
                               embedding vector({DIM}), PRIMARY KEY (corpus_id, id))""")
        await copy_rows(conn, "space", rows, True)
        await conn.execute("CREATE INDEX ON space USING hnsw (embedding vector_cosine_ops)")
        print(f"shared table of the 16 corpora loaded and indexed in "
              f"{time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        await conn.execute(f"""CREATE TABLE shared (corpus_id int NOT NULL, id text NOT NULL,
                               embedding vector({DIM}), PRIMARY KEY (corpus_id, id))""")
        await copy_rows(conn, "shared", rows, True)
        # The large space: corpus 100 holds --big more vectors.
        await copy_rows(conn, "shared", [(100, f"b{i}", v) for i, v in enumerate(big)], True)
        await conn.execute("CREATE INDEX shared_hnsw ON shared USING hnsw (embedding vector_cosine_ops)")
        print(f"large shared table ({len(docs) + len(big):,} rows) loaded and indexed in "
              f"{time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        await conn.execute("CREATE INDEX shared_part0 ON shared USING hnsw "
                           "(embedding vector_cosine_ops) WHERE corpus_id = 0")
        print(f"partial HNSW index of one small corpus built in {time.perf_counter() - t0:.2f} s")
        await conn.execute("VACUUM ANALYZE")


def ordered(table: str, where: str = "") -> str:
    return (f"SELECT id, embedding <=> %(q)s AS d FROM {table} {where} "
            f"ORDER BY d LIMIT %(n)s")


async def run(pool: AsyncConnectionPool, stmt: str, q: npt.NDArray[np.float32], n: int,
              iterative: bool = False) -> list[tuple[str, float]]:
    async with pool.connection() as conn:
        await conn.execute("SELECT set_config('hnsw.ef_search', %s, false), "
                           "set_config('hnsw.iterative_scan', %s, false)",
                           (str(n), "relaxed_order" if iterative else "off"))
        cur = await conn.execute(stmt, {"q": q, "n": n})
        rows = await cur.fetchall()
    return sorted((str(r[0]), float(r[1])) for r in rows)


async def bench(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="proto-shared-"))
    server = embedded.start(tmp / "pg")
    try:
        docs = vectors("mixture", args.docs, 1)
        big = vectors("mixture", args.big, 2)
        queries = vectors("mixture", args.queries, 3)
        await load(server.dsn, docs, big)
        n = args.candidates
        pool = AsyncConnectionPool(server.dsn, min_size=8, max_size=8, open=False,
                                   configure=configure)
        await pool.open()
        half = list(range(0, PARTS, 2))
        union = " UNION ALL ".join(f"(SELECT * FROM ({ordered(f'part{p}')}) s{p})"
                                   for p in range(PARTS))
        union = f"SELECT * FROM ({union}) u ORDER BY d LIMIT %(n)s"

        async def conc(q: npt.NDArray[np.float32]) -> list[tuple[str, float]]:
            parts = await asyncio.gather(*(run(pool, ordered(f"part{p}"), q, n)
                                           for p in range(PARTS)))
            return sorted((r for part in parts for r in part), key=lambda r: r[1])[:n]

        exact_small = ("WITH c AS MATERIALIZED (SELECT id, embedding FROM shared "
                       "WHERE corpus_id = 0) SELECT id, embedding <=> %(q)s AS d FROM c "
                       "ORDER BY d LIMIT %(n)s")
        systems: dict[str, Callable[[npt.NDArray[np.float32]], Awaitable[object]]] = {
            "per-corpus: one corpus": lambda q: run(pool, ordered("one"), q, n),
            "per-corpus: 16 corpora, 16 statements": conc,
            "per-corpus: 16 corpora, one UNION ALL": lambda q: run(pool, union, q, n),
            "shared: all 16 corpora (no filter)": lambda q: run(pool, ordered("space"), q, n),
            "shared: 8 of 16 corpora (ANY, iterative)": lambda q: run(
                pool, ordered("space", f"WHERE corpus_id = ANY('{{{','.join(map(str, half))}}}')"),
                q, n, iterative=True),
            "small corpus: own table": lambda q: run(pool, ordered("part0"), q, n),
            "small corpus: shared, filtered HNSW": lambda q: run(
                pool, ordered("shared", "WHERE corpus_id + 0 = 0"), q, n, iterative=True),
            "small corpus: shared, exact by btree": lambda q: run(pool, exact_small, q, n),
            "small corpus: shared, partial HNSW": lambda q: run(
                pool, ordered("shared", "WHERE corpus_id = 0"), q, n),
        }
        times: dict[str, list[float]] = {name: [] for name in systems}
        for q in queries[:10]:  # warm-up
            for fn in systems.values():
                await fn(q)
        for q in queries:
            for name, fn in systems.items():
                t0 = time.perf_counter()
                await fn(q)
                times[name].append((time.perf_counter() - t0) * 1000)
        print(f"\n{args.docs:,} vectors (384-d, clustered) as 1 corpus and as {PARTS} corpora; "
              f"large space {args.big:,} more; top {n} (ef_search {n}); "
              f"{args.queries} queries, systems alternating")
        print("| system | p50 ms | p95 ms | vs one corpus |")
        print("|---|---:|---:|---:|")
        base = statistics.median(times["per-corpus: one corpus"])
        for name, ts in times.items():
            p50 = statistics.median(ts)
            p95 = sorted(ts)[int(0.95 * (len(ts) - 1))]
            print(f"| {name} | {p50:.2f} | {p95:.2f} | {p50 / base:.2f}x |")
        # Recall of the filtered shared variants vs the exact answer.
        recalls: dict[str, list[float]] = {"8 of 16 (ANY)": [], "small: filtered": [],
                                          "small: partial": []}
        for q in queries[:50]:
            async with pool.connection() as conn:
                await conn.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
                want_half = {str(r[0]) for r in await (await conn.execute(
                    ordered("space", f"WHERE corpus_id = ANY('{{{','.join(map(str, half))}}}')"),
                    {"q": q, "n": n})).fetchall()}
                want_small = {str(r[0]) for r in await (await conn.execute(
                    ordered("shared", "WHERE corpus_id = 0"), {"q": q, "n": n})).fetchall()}
                await conn.execute("RESET enable_indexscan; RESET enable_bitmapscan")
            got = {r[0] for r in await run(pool, ordered(
                "space", f"WHERE corpus_id = ANY('{{{','.join(map(str, half))}}}')"), q, n, True)}
            recalls["8 of 16 (ANY)"].append(len(got & want_half) / max(1, len(want_half)))
            got = {r[0] for r in await run(pool, ordered("shared", "WHERE corpus_id + 0 = 0"),
                                           q, n, True)}
            recalls["small: filtered"].append(len(got & want_small) / max(1, len(want_small)))
            got = {r[0] for r in await run(pool, ordered("shared", "WHERE corpus_id = 0"), q, n)}
            recalls["small: partial"].append(len(got & want_small) / max(1, len(want_small)))
        print(f"recall@{n} vs exact: " + ", ".join(
            f"{k} {statistics.mean(v):.3f}" for k, v in recalls.items()))
        await pool.close()
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=8041)
    ap.add_argument("--big", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--candidates", type=int, default=100)
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
