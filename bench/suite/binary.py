"""Binary quantization against halfvec HNSW for large dimensions, straight in PostgreSQL.

A Gaussian mixture of N points of D dimensions (default 100,000 x 1,024), stored once as
halfvec(D) (what a float16 corpus holds), with two indexes over the same table, each built
as vectord builds one: HNSW over the halfvec column, searched at ef_search 100; HNSW over
binary_quantize(embedding)::bit(D), whose nearest C by Hamming distance are re-scored by
the full halfvec vectors (ORDER BY embedding <=> q LIMIT 10), for several C (ef_search =
C). Each index's size and build time, recall@10 against exact numpy search, and p50 / p95
of the queries one at a time (the two alternating, warm).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.data.vectors import exact_top, mixture
from bench.harness import Run
from bench.harness.pg import copy_vectors, hnsw, vector_table
from bench.harness.timing import alternated, pct
from internal.pg import embedded

OPTIONS = {"n": 100_000, "dim": 1024, "queries": 500}
QUICK = {"n": 10_000, "queries": 100}
K, MIB = 10, 2**20
CANDIDATES = (40, 100, 200, 400, 800)
HALF = "SELECT id FROM items ORDER BY embedding <=> %(q)s LIMIT 10"
BINARY = """
SELECT id FROM (SELECT id, embedding FROM items
                ORDER BY binary_quantize(embedding)::bit({dim}) <~> binary_quantize(%(q)s::halfvec({dim}))
                LIMIT {c}) near
ORDER BY embedding <=> %(q)s LIMIT 10"""


def build(conn: psycopg.Connection[Any], name: str, expr: str) -> tuple[float, int]:
    t = time.perf_counter()
    hnsw(conn, "items", name, expr)
    secs = time.perf_counter() - t
    return secs, int(conn.execute(f"SELECT pg_relation_size('{name}')").fetchone()[0])  # type: ignore[index]


def timed(conn: psycopg.Connection[Any], stmt: str, ef: int, qs: np.ndarray[Any, Any]
          ) -> tuple[list[float], list[list[int]]]:
    conn.execute(f"SET hnsw.ef_search = {ef}")
    ms, ids = [], []
    for q in qs:
        t = time.perf_counter()
        ids.append([int(r[0]) for r in conn.execute(stmt, {"q": q}, prepare=True).fetchall()])
        ms.append((time.perf_counter() - t) * 1000)
    return ms, ids


def main(run: Run) -> None:
    a = run.args
    pts = mixture(a.n + a.queries, a.dim, 1000, 42)
    qs, data = pts[:a.queries], pts[a.queries:]
    truth = exact_top(data, qs, K, block=100)
    pg = embedded.start(run.folder / "pg")
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            vector_table(conn, "items", "float16", a.dim)
            register_vector(conn)
            t = time.perf_counter()
            copy_vectors(conn, "items", data, "float16")
            load_s = time.perf_counter() - t
            conn.execute("VACUUM ANALYZE items")
            heap = int(conn.execute("SELECT pg_table_size('items')").fetchone()[0])  # type: ignore[index]
            half_s, half_b = build(conn, "items_half", "embedding halfvec_cosine_ops")
            bin_s, bin_b = build(conn, "items_bin", f"(binary_quantize(embedding)::bit({a.dim})) bit_hamming_ops")
            plans = {"halfvec HNSW, ef_search 100": (HALF, 100)}
            plans |= {f"binary HNSW, {c} re-scored": (BINARY.format(dim=a.dim, c=c), c) for c in CANDIDATES}
            for stmt, ef in plans.values():  # warm: every page read once
                timed(conn, stmt, ef, qs)
            lat: dict[str, list[float]] = {n: [] for n in plans}
            found: dict[str, list[list[int]]] = {}
            for rnd in range(2):
                for name in alternated(list(plans), rnd):
                    ms, found[name] = timed(conn, *plans[name], qs)
                    lat[name] += ms
    finally:
        pg.stop()
    run.say(f"{a.n} x {a.dim} (Gaussian mixture, 1,000 centres, seed 42), {a.queries} queries, k {K}; "
            f"table (halfvec) {heap / MIB:.0f} MiB, loaded in {load_s:.0f} s; halfvec HNSW: "
            f"{half_b / MIB:.1f} MiB, built in {half_s:.1f} s; binary HNSW: {bin_b / MIB:.1f} MiB, "
            f"built in {bin_s:.1f} s")
    rows = []
    for name in plans:
        hits = sum(len(set(found[name][i]) & {int(j) for j in truth[i]}) for i in range(len(qs)))
        rows.append((name, (half_b if name.startswith("halfvec") else bin_b) / MIB,
                     hits / (len(qs) * K), pct(lat[name], 50), pct(lat[name], 95)))
    run.table("each search, warm, the two alternating", ["search", "index MiB:.1f", "recall@10:.4f",
                                                         "p50 ms:.2f", "p95 ms:.2f"], rows)
