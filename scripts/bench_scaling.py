"""Per-corpus storage and query cost as a corpus grows (the figures behind docs/SCALING.md).

Runs vectord in-process over its own embedded PostgreSQL (temporary data dir), creates
one corpus of 384-d vectors (a Gaussian mixture of 1,000 centres, as real embeddings
are clustered) with 30-word texts drawn from a Zipf vocabulary of 5,000 words, and at
each size in --sizes (default 10k and 100k) prints: load time, HNSW build time, the
size of the items heap, each of its indexes and each lexical side table, and the p50 /
p95 of vector, lexical and hybrid searches over HTTP (one client, sequential).

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_scaling.py \
        [--sizes 10000,100000] [--queries 200]
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
from typing import Any

import aiohttp
import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.common import logs  # noqa: E402
from internal.config import Config  # noqa: E402
from internal.vectord.server import STORE, make_app  # noqa: E402
from tests.helpers import serve, url_of, with_section  # noqa: E402

DIM = 384
CORPUS = "scale"
VOCAB = 5000
SIZES_SQL = """
SELECT c.relname, c.relkind,
       CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END AS own,
       pg_total_relation_size(c.oid) AS total
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relname LIKE %(pattern)s AND c.relkind IN ('r', 'i')
ORDER BY c.relkind DESC, c.relname"""


def words(rng: np.random.Generator, n: int) -> str:
    ranks = np.minimum(rng.zipf(1.2, n), VOCAB) - 1
    return " ".join(f"w{int(r)}" for r in ranks)


def vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    pick = centres[rng.integers(0, len(centres), n)]
    v = pick + rng.normal(0, 0.35, (n, DIM)).astype(np.float32)
    out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def timed(http: aiohttp.ClientSession, url: str, bodies: list[dict[str, Any]]) -> list[float]:
    out = []
    for body in bodies:
        t0 = time.perf_counter()
        async with http.post(url, json=body) as resp:
            await resp.read()
            assert resp.status == 200, await resp.text()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def run(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    logs.configure("warning", "console")  # no access line per request in the output
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-scaling-"))
    cfg = with_section(Config(), "vectord", data_dir=str(tmp / "pg"), dsn="", pool_min=1,
                       pool_max=4)
    app = make_app(cfg)
    server = await serve(app)
    rng = np.random.default_rng(42)
    centres = rng.normal(0, 1, (1000, DIM)).astype(np.float32)
    try:
        base = url_of(server)
        dsn = app[STORE].pool.dsn
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as http:
            async with http.post(f"{base}/v1/vectors/corpora", json={
                    "name": CORPUS, "dim": DIM, "language": "simple", "defer_index": True}) as r:
                assert r.status == 201, await r.text()
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT id FROM vectord_corpora WHERE name = %s",
                                   (CORPUS,)).fetchone()
                assert row is not None
                corpus_id = int(row[0])
            loaded = 0
            for size in sizes:
                t0 = time.perf_counter()
                while loaded < size:
                    n = min(1000, size - loaded)
                    vecs = vectors(rng, centres, n)
                    items = [{"id": f"d{loaded + i:08d}", "vector": vecs[i].tolist(),
                              "text": words(rng, 30)} for i in range(n)]
                    async with http.post(f"{base}/v1/vectors/corpora/{CORPUS}/items",
                                         json={"items": items}) as r:
                        assert r.status == 200, await r.text()
                    loaded += n
                load_s = time.perf_counter() - t0
                async with http.post(f"{base}/v1/vectors/corpora/{CORPUS}/index", json={}) as r:
                    index = await r.json()
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE")
                    rows = conn.execute(SIZES_SQL, {"pattern": f"vectord_items_{corpus_id}%"}
                                        ).fetchall()
                qv = vectors(rng, centres, args.queries)
                vec = await timed(http, f"{base}/v1/vectors/corpora/{CORPUS}/search", [
                    {"mode": "vector", "query_vector": q.tolist(), "k": 10} for q in qv])
                lex = await timed(http, f"{base}/v1/vectors/corpora/{CORPUS}/search", [
                    {"mode": "lexical", "query_text": words(rng, 3), "k": 10}
                    for _ in range(args.queries)])
                hyb = await timed(http, f"{base}/v1/vectors/corpora/{CORPUS}/search", [
                    {"mode": "hybrid", "query_text": words(rng, 3), "query_vector": q.tolist(),
                     "k": 10} for q in qv])
                print(f"\n== {size:,} items x {DIM} (rows added in {load_s:.1f} s; HNSW "
                      f"index: {index.get('seconds')} s, 0 when it existed already and was "
                      "kept up to date by the inserts)")
                total = 0
                for name, kind, own, whole in rows:
                    label = "index" if kind == "i" else "table (heap + TOAST)"
                    if kind == "r":
                        total += whole  # the table with its indexes
                    print(f"  {name:<48} {label:<20} {mb(own):>12}")
                print(f"  {'all tables and indexes of the corpus':<69} {mb(total):>12}  "
                      f"({total / size:,.0f} bytes an item)")
                for label, xs in (("vector k=10", vec), ("lexical k=10", lex),
                                  ("hybrid k=10", hyb)):
                    print(f"  {label:<14} p50 {statistics.median(xs):7.2f} ms   "
                          f"p95 {pct(xs, 95):7.2f} ms   ({len(xs)} queries)")
    finally:
        await server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
