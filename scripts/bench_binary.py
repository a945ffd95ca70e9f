"""Binary quantization against halfvec HNSW for large dimensions, straight in PostgreSQL.

A Gaussian mixture of N points of D dimensions (default 100,000 x 1,024; scripts/
bench_data.py), stored once as halfvec(D) (what a float16 corpus holds), with two
indexes over the same table, each built as vectord builds one (m 16, ef_construction 64,
maintenance_work_mem 1GB, 2 workers):
  - HNSW over the halfvec column (halfvec_cosine_ops), searched at ef_search 100;
  - HNSW over binary_quantize(embedding)::bit(D) (bit_hamming_ops), whose nearest C by
    Hamming distance are re-scored by the full halfvec vectors from the table
    (ORDER BY embedding <=> q LIMIT 10), for several C (ef_search = C).
Prints each index's size and build time, recall@10 against exact numpy search, and
p50 / p95 of 500 queries one at a time (the two alternating, warm).

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_binary.py [--n 100000] [--dim 1024]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_data import exact_top, mixture, pct  # noqa: E402
from bench_million import copy_vectors  # noqa: E402

from internal.pg import embedded  # noqa: E402

K = 10
CANDIDATES = (40, 100, 200, 400, 800)
HALF = "SELECT id FROM items ORDER BY embedding <=> %(q)s LIMIT 10"
BINARY = """
SELECT id FROM (SELECT id, embedding FROM items
                ORDER BY binary_quantize(embedding)::bit({dim}) <~> binary_quantize(%(q)s::halfvec({dim}))
                LIMIT {c}) near
ORDER BY embedding <=> %(q)s LIMIT 10"""


def build(conn: psycopg.Connection[Any], name: str, expr: str) -> tuple[float, int]:
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    t = time.perf_counter()
    conn.execute(f"CREATE INDEX {name} ON items USING hnsw ({expr}) WITH (m = 16, ef_construction = 64)")
    secs = time.perf_counter() - t
    size = conn.execute(f"SELECT pg_relation_size('{name}')").fetchone()[0]  # type: ignore[index]
    return secs, int(size)


def timed(conn: psycopg.Connection[Any], stmt: str, ef: int, qs: np.ndarray[Any, Any]
          ) -> tuple[list[float], list[list[int]]]:
    conn.execute(f"SET hnsw.ef_search = {ef}")
    ms, ids = [], []
    for q in qs:
        t = time.perf_counter()
        ids.append([int(r[0]) for r in conn.execute(stmt, {"q": q}, prepare=True).fetchall()])
        ms.append((time.perf_counter() - t) * 1000)
    return ms, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    pts = mixture(args.n + args.queries, args.dim, 1000, 42)
    qs, data = pts[:args.queries], pts[args.queries:]
    truth = exact_top(data, qs, K, block=100)
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-binary-"))
    pg = embedded.start(tmp / "pg")
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding halfvec({args.dim}) NOT NULL)")
            conn.execute("ALTER TABLE items ALTER COLUMN embedding SET STORAGE MAIN")
            t = time.perf_counter()
            copy_vectors(conn, "items", data, "float16")
            load_s = time.perf_counter() - t
            conn.execute("VACUUM ANALYZE items")
            heap = int(conn.execute("SELECT pg_table_size('items')").fetchone()[0])  # type: ignore[index]
            half_s, half_b = build(conn, "items_half", "embedding halfvec_cosine_ops")
            bin_s, bin_b = build(conn, "items_bin",
                                 f"(binary_quantize(embedding)::bit({args.dim})) bit_hamming_ops")
            plans = {"halfvec HNSW, ef_search 100": (HALF, 100)}
            for c in CANDIDATES:
                plans[f"binary HNSW, {c} re-scored"] = (BINARY.format(dim=args.dim, c=c), c)
            for stmt, ef in plans.values():  # warm: every page read once
                timed(conn, stmt, ef, qs)
            lat: dict[str, list[float]] = {n: [] for n in plans}
            found: dict[str, list[list[int]]] = {}
            for rnd in range(2):  # alternating
                for name in (list(plans) if rnd == 0 else list(plans)[::-1]):
                    ms, ids = timed(conn, *plans[name], qs)
                    lat[name] += ms
                    found[name] = ids
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    mib = 2**20
    print(f"{args.n} x {args.dim} (Gaussian mixture, 1,000 centres, seed 42), {args.queries} queries, "
          f"k {K}; table (halfvec) {heap / mib:.0f} MiB, loaded in {load_s:.0f} s")
    print(f"halfvec HNSW: {half_b / mib:.1f} MiB, built in {half_s:.1f} s; "
          f"binary HNSW: {bin_b / mib:.1f} MiB, built in {bin_s:.1f} s\n")
    print("| search | index MiB | recall@10 | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for name in plans:
        hits = sum(len(set(found[name][i]) & {int(j) for j in truth[i]}) for i in range(len(qs)))
        size = half_b if name.startswith("halfvec") else bin_b
        print(f"| {name} | {size / mib:.1f} | {hits / (len(qs) * K):.4f} | "
              f"{pct(lat[name], 50):.2f} | {pct(lat[name], 95):.2f} |")


if __name__ == "__main__":
    main()
