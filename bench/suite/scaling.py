"""Per-corpus storage and query cost as a corpus grows (the figures behind docs/SCALING.md).

vectord in-process over its own embedded PostgreSQL; for each size in --sizes, one corpus
of 384-d vectors (a Gaussian mixture of 1,000 centres) with 30-word texts from a Zipf
vocabulary of 5,000 words, loaded with its HNSW index deferred, the index built; then load
and build time, the size of the items heap, each of its indexes and each lexical side
table, the process's resident memory, and p50 / p95 of vector, lexical and hybrid searches
over HTTP (one client; the lexical index read once cold, then timed warm). Each size is a
corpus of its own, deleted before the next.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import psycopg

from bench.harness import Run
from bench.harness.http import CORPORA, call, post
from bench.harness.timing import median, one_at_a_time, pct
from internal.common import logs
from internal.config import Config
from internal.vectord.server import STORE, make_app
from tests.helpers import serve, url_of, with_section

OPTIONS = {"sizes": "10000,100000", "queries": 200}
QUICK = {"sizes": "10000", "queries": 60}
DIM, VOCAB = 384, 5000
SIZES_SQL = """
SELECT c.relname, c.relkind,
       CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END AS own,
       pg_total_relation_size(c.oid) AS total
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relname LIKE %(pattern)s AND c.relkind IN ('r', 'i')
ORDER BY c.relkind DESC, c.relname"""


def words(rng: np.random.Generator, n: int) -> str:
    return " ".join(f"w{int(r)}" for r in np.minimum(rng.zipf(1.2, n), VOCAB) - 1)


def vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    v = centres[rng.integers(0, len(centres), n)] + rng.normal(0, 0.35, (n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)  # type: ignore[no-any-return]


def rss_mb() -> float:
    """This process's resident memory (vectord runs in it), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_size(run: Run, http: aiohttp.ClientSession, base: str, dsn: str,
                   rng: np.random.Generator, centres: np.ndarray, size: int) -> None:
    corpus, url = f"scale_{size}", f"{base}{CORPORA}/scale_{size}"
    await post(http, f"{base}{CORPORA}", {"name": corpus, "dim": DIM, "language": "simple",
                                          "defer_index": True})
    with psycopg.connect(dsn) as conn:
        corpus_id = int(conn.execute("SELECT id FROM vectord_corpora WHERE name = %s",
                                     (corpus,)).fetchone()[0])  # type: ignore[index]
    t0 = time.perf_counter()
    for loaded in range(0, size, 1000):
        vecs = vectors(rng, centres, min(1000, size - loaded))
        await post(http, f"{url}/items", {"items": [
            {"id": f"d{loaded + i:08d}", "vector": v.tolist(), "text": words(rng, 30)}
            for i, v in enumerate(vecs)]})
    load_s = time.perf_counter() - t0
    index = await post(http, f"{url}/index", {})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        rels = conn.execute(SIZES_SQL, {"pattern": f"vectord_items_{corpus_id}%"}).fetchall()
        spaces = conn.execute(SIZES_SQL, {"pattern": "vectord_space%"}).fetchall()
    qv = vectors(rng, centres, run.args.queries)
    lex = [{"mode": "lexical", "query_text": words(rng, 3), "k": 10} for _ in range(run.args.queries)]

    def timed(bodies: list[dict[str, Any]]) -> Any:
        return one_at_a_time(lambda b: post(http, f"{url}/search", b), bodies)
    t1 = time.perf_counter()
    cold = await timed(lex)  # loads the lexemes' postings into memory
    cold_s = time.perf_counter() - t1
    vec = await timed([{"mode": "vector", "query_vector": q.tolist(), "k": 10} for q in qv])
    warm = await timed(lex)
    hyb = await timed([{"mode": "hybrid", "query_text": b["query_text"], "query_vector": q.tolist(),
                        "k": 10} for b, q in zip(lex, qv, strict=True)])
    total = sum(whole for _, kind, _, whole in rels if kind == "r")
    rows = [(name, "index" if kind == "i" else "table (heap + TOAST)", own / 2**20)
            for name, kind, own, _ in rels]
    rows += [("all tables and indexes of the corpus", f"{total / size:,.0f} bytes an item", total / 2**20),
             ("shared space tables", "", sum(w for _, k, _, w in spaces if k == "r") / 2**20)]
    run.table(f"{size:,} items x {DIM} (rows added in {load_s:.1f} s, HNSW deferred; HNSW built "
              f"in {index.get('seconds')} s); resident memory of vectord's process {rss_mb():,.0f} MB",
              ["relation", "kind", "MB:,.1f"], rows)
    run.table(f"{size:,} items: searches, one client", ["search", "p50 ms:.2f", "p95 ms:.2f", "queries:d"],
              [(f"lexical, first pass ({cold_s:.1f} s)", median(cold), pct(cold, 95), len(cold)),
               *((label, median(xs), pct(xs, 95), len(xs)) for label, xs in
                 (("vector k=10", vec), ("lexical k=10", warm), ("hybrid k=10", hyb)))])
    await call(http, "DELETE", url)


async def main(run: Run) -> None:
    logs.configure("warning", "console")  # no access line per request in the output
    cfg = with_section(Config(), "vectord", data_dir=str(run.folder / "pg"), dsn="", pool_min=1, pool_max=4)
    app = make_app(cfg)
    server = await serve(app)
    rng = np.random.default_rng(42)
    centres = rng.normal(0, 1, (1000, DIM)).astype(np.float32)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=6 * 3600)) as http:
            for size in (int(s) for s in run.args.sizes.split(",")):
                await one_size(run, http, url_of(server), app[STORE].pool.dsn, rng, centres, size)
    finally:
        await server.close()
