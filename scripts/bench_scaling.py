"""Per-corpus storage and query cost as a corpus grows (the figures behind docs/SCALING.md).

Runs vectord in-process over its own embedded PostgreSQL (temporary data dir) and, for
each size in --sizes (default 10k and 100k; docs/SCALING.md also has 1M), creates one
corpus of 384-d vectors (a Gaussian mixture of 1,000 centres, as real embeddings are
clustered) with 30-word texts drawn from a Zipf vocabulary of 5,000 words, loads it with
its HNSW index deferred (the bulk-load path), builds the index, and prints: load time,
HNSW build time, the size of the items heap, each of its indexes and each lexical side
table, the process's resident memory, and the p50 / p95 of vector, lexical and hybrid
searches over HTTP (one client, sequential; the lexical index is read once cold, then
timed warm). Each size is a corpus of its own, deleted before the next.

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_scaling.py \
        [--sizes 10000,100000,1000000] [--queries 200]
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
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=6 * 3600)) as http:
            for size in sizes:
                await one_size(http, base, dsn, rng, centres, size, args.queries)
    finally:
        await server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def rss_mb() -> float:
    """This process's resident memory (vectord runs in it), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def note(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def one_size(http: aiohttp.ClientSession, base: str, dsn: str, rng: np.random.Generator,
                   centres: np.ndarray, size: int, queries: int) -> None:
    corpus = f"scale_{size}"
    async with http.post(f"{base}/v1/vectors/corpora", json={
            "name": corpus, "dim": DIM, "language": "simple", "defer_index": True}) as r:
        assert r.status == 201, await r.text()
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (corpus,)).fetchone()
        assert row is not None
        corpus_id = int(row[0])
    note(f"{size:,}: loading")
    t0 = time.perf_counter()
    loaded = 0
    while loaded < size:
        n = min(1000, size - loaded)
        vecs = vectors(rng, centres, n)
        items = [{"id": f"d{loaded + i:08d}", "vector": vecs[i].tolist(),
                  "text": words(rng, 30)} for i in range(n)]
        async with http.post(f"{base}/v1/vectors/corpora/{corpus}/items",
                             json={"items": items}) as r:
            assert r.status == 200, await r.text()
        loaded += n
        if loaded % 100_000 == 0:
            note(f"{size:,}: {loaded:,} loaded in {time.perf_counter() - t0:.0f} s")
    load_s = time.perf_counter() - t0
    note(f"{size:,}: building the HNSW index")
    async with http.post(f"{base}/v1/vectors/corpora/{corpus}/index", json={}) as r:
        index = await r.json()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        rows = conn.execute(SIZES_SQL, {"pattern": f"vectord_items_{corpus_id}%"}).fetchall()
        spaces = conn.execute(SIZES_SQL, {"pattern": "vectord_space%"}).fetchall()
    note(f"{size:,}: timing searches")
    url = f"{base}/v1/vectors/corpora/{corpus}/search"
    qv = vectors(rng, centres, queries)
    lex_bodies = [{"mode": "lexical", "query_text": words(rng, 3), "k": 10}
                  for _ in range(queries)]
    t1 = time.perf_counter()
    cold = await timed(http, url, lex_bodies)  # loads the lexemes' postings into memory
    cold_s = time.perf_counter() - t1
    vec = await timed(http, url, [{"mode": "vector", "query_vector": q.tolist(), "k": 10}
                                  for q in qv])
    lex = await timed(http, url, lex_bodies)
    hyb = await timed(http, url, [
        {"mode": "hybrid", "query_text": b["query_text"], "query_vector": q.tolist(), "k": 10}
        for b, q in zip(lex_bodies, qv, strict=True)])
    print(f"\n== {size:,} items x {DIM} (rows added in {load_s:.1f} s with the HNSW index "
          f"deferred; HNSW index built in {index.get('seconds')} s)")
    total = 0
    for name, kind, own, whole in rows:
        label = "index" if kind == "i" else "table (heap + TOAST)"
        if kind == "r":
            total += whole  # the table with its indexes
        print(f"  {name:<48} {label:<20} {mb(own):>12}")
    print(f"  {'all tables and indexes of the corpus':<69} {mb(total):>12}  "
          f"({total / size:,.0f} bytes an item)")
    shared = sum(whole for _, kind, _, whole in spaces if kind == "r")
    print(f"  {'shared space tables (a corpus alone in its space keeps no copy)':<69} "
          f"{mb(shared):>12}")
    print(f"  resident memory of the process running vectord (and this client): "
          f"{rss_mb():,.0f} MB")
    print(f"  lexical, first pass (postings read into memory): p50 {statistics.median(cold):.2f}"
          f" ms, p95 {pct(cold, 95):.2f} ms, {cold_s:.1f} s for {len(cold)} queries")
    for label, xs in (("vector k=10", vec), ("lexical k=10", lex), ("hybrid k=10", hyb)):
        print(f"  {label:<14} p50 {statistics.median(xs):7.2f} ms   "
              f"p95 {pct(xs, 95):7.2f} ms   ({len(xs)} queries)", flush=True)
    async with http.delete(f"{base}/v1/vectors/corpora/{corpus}") as r:
        assert r.status in (200, 204), await r.text()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
