"""Benchmark vectord's lexical (BM25) mode on SciFact against the bm25s library.

Starts vectord in-process on a free loopback port (embedded PostgreSQL in a temporary
folder, or LAKEHOUSE_PG_DSN), loads SciFact through the HTTP API, and prints in one
run: nDCG@10 on the train qrels of vectord's lexical mode next to bm25s with the same
stemmer (Snowball English, English stop words), and p50/p95 lexical latency over HTTP on
SciFact and on a corpus of --docs documents (SciFact repeated with new ids).
Targets: nDCG@10 within 0.01 of bm25s on SciFact train, Cranfield dev and CISI dev
(issue 14: all three printed side by side); p50 <= 20 ms at 100,000 documents.

    .venv/bin/python scripts/bench_lexical.py [--docs 100000] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.config import Config  # noqa: E402
from internal.evaluation import beir, metrics  # noqa: E402
from internal.vectord import lexical, schema  # noqa: E402
from internal.vectord.server import STORE, make_app  # noqa: E402
from internal.vectord.store import Store  # noqa: E402

BATCH = 1000
C = "/v1/vectors/corpora"


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with http.post(url, json=body) as resp:
        data = await resp.json(content_type=None)
        if resp.status >= 300:
            raise RuntimeError(f"{url}: {resp.status} {data}")
        return data


async def load(http: aiohttp.ClientSession, base: str, name: str, docs: list[beir.Doc],
               total: int) -> float:
    """Create the corpus and upsert `total` docs (docs repeated with new ids)."""
    await post(http, f"{base}{C}", {"name": name, "dim": 1, "metric": "l2",
                                    "language": "english", "defer_index": True})
    started = time.perf_counter()
    batch: list[dict[str, Any]] = []
    for i in range(total):
        d = docs[i % len(docs)]
        rep = i // len(docs)
        batch.append({"id": d.id if rep == 0 else f"{d.id}~{rep}", "vector": [0.0],
                      "title": d.title, "text": d.text})
        if len(batch) == BATCH or i == total - 1:
            await post(http, f"{base}{C}/{name}/items", {"items": batch})
            batch = []
    return time.perf_counter() - started


async def run_queries(http: aiohttp.ClientSession, base: str, name: str,
                      queries: dict[str, str], k: int = 10
                      ) -> tuple[dict[str, list[str]], list[float]]:
    run: dict[str, list[str]] = {}
    took: list[float] = []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        body = await post(http, f"{base}{C}/{name}/search",
                          {"mode": "lexical", "query_text": text, "k": k})
        took.append((time.perf_counter() - t0) * 1000)
        run[qid] = [h["id"] for h in body["hits"]]
    return run, took


def bm25s_run(docs: list[beir.Doc], queries: dict[str, str], k: int = 10
              ) -> dict[str, list[str]]:
    import bm25s  # type: ignore[import-untyped]
    import Stemmer  # type: ignore[import-not-found]

    stemmer = Stemmer.Stemmer("english")
    corpus = [f"{d.title} {d.text}" for d in docs]
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    qids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer,
                            show_progress=False)
    results, _ = retriever.retrieve(tokens, k=k, show_progress=False)
    return {qid: [docs[int(results[i, j])].id for j in range(k)] for i, qid in enumerate(qids)}


async def exhaustive_ms(store: Store, name: str, queries: dict[str, str]) -> list[float]:
    """The baseline: the same BM25 scores from the statement that reads every posting."""
    corpus = await store.corpus(name)
    stmt = lexical.lexical_sql(schema.items_table(corpus.id), corpus.id, ["english"],
                               sql.SQL("TRUE"), False, exhaustive=True)
    took = []
    async with store.pool.connection() as conn:
        for text in queries.values():
            params = lexical.bm25_params(text, ["english"], 1.2, 0.75,
                                         lexical.DEFAULT_FIELD_WEIGHTS, 10)
            t0 = time.perf_counter()
            await (await conn.execute(stmt, params)).fetchall()
            took.append((time.perf_counter() - t0) * 1000)
    return took


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else values[0]


class _QualityOnly(Exception):
    """--quality-only: stop after the quality table."""


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--docs", type=int, default=100_000, help="size of the large corpus")
    ap.add_argument("--queries", type=int, default=300, help="queries timed on the large corpus")
    ap.add_argument("--quality-only", action="store_true",
                    help="only nDCG@10 on the three sets (no timing, no large corpus)")
    args = ap.parse_args()

    ds = beir.load(args.data, "train")
    # Quality on SciFact train, Cranfield dev and CISI dev (issue 14): vectord's lexical mode
    # and bm25s (which counts a repeated query token each time, as vectord does) side by side.
    data = ROOT.parent / "shared" / "data"
    others = [beir.load(data / "cranfield", "dev"), beir.load(data / "cisi", "dev")]
    quality: list[tuple[str, float, float]] = []
    dsn = os.environ.get("LAKEHOUSE_PG_DSN", "")
    tmp = tempfile.mkdtemp(prefix="bench-lexical-")
    cfg = Config()
    cfg = Config(vectord=type(cfg.vectord)(dsn=dsn, data_dir=f"{tmp}/pg", pool_min=1, pool_max=4))
    runner = web.AppRunner(make_app(cfg))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    small, large = f"bench_lex_{os.getpid()}", f"bench_lex_big_{os.getpid()}"
    try:
        async with aiohttp.ClientSession() as http:
            load_small = await load(http, base, small, ds.docs, len(ds.docs))
            await run_queries(http, base, small, dict(list(ds.queries.items())[:20]))  # warm
            run, took_small = await run_queries(http, base, small, ds.queries)
            ours = metrics.evaluate(run, ds.qrels)
            ref = metrics.evaluate(bm25s_run(ds.docs, ds.queries), ds.qrels)
            quality.append((f"{ds.name} train", ours["ndcg@10"], ref["ndcg@10"]))
            for i, other in enumerate(others):
                name = f"bench_lex_q{i}_{os.getpid()}"
                await load(http, base, name, other.docs, len(other.docs))
                orun, _ = await run_queries(http, base, name, other.queries)
                quality.append((f"{other.name} dev",
                                metrics.evaluate(orun, other.qrels)["ndcg@10"],
                                metrics.evaluate(bm25s_run(other.docs, other.queries),
                                                 other.qrels)["ndcg@10"]))
                async with http.delete(f"{base}{C}/{name}"):
                    pass
            if args.quality_only:
                async with http.delete(f"{base}{C}/{small}"):
                    pass
                raise _QualityOnly

            load_large = await load(http, base, large, ds.docs, args.docs)
            timed = dict(list(ds.queries.items())[: args.queries])
            await run_queries(http, base, large, dict(list(timed.items())[:20]))  # warm
            _, took_large = await run_queries(http, base, large, timed)
            took_base = await exhaustive_ms(runner.app[STORE], large, timed)
            for name in (small, large):
                async with http.delete(f"{base}{C}/{name}"):
                    pass
    except _QualityOnly:
        pass
    finally:
        await runner.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    print("\nnDCG@10, vectord lexical vs bm25s (k1 1.2, b 0.75, Snowball English, English "
          "stop words; target: within 0.01 on every set)\n")
    print("| set | vectord lexical | bm25s | diff |\n|---|---:|---:|---:|")
    for label, a, b in quality:
        print(f"| {label} | {a:.4f} | {b:.4f} | {a - b:+.4f} |")
    if args.quality_only:
        return 0

    ndcg_ours, ndcg_ref = ours["ndcg@10"], ref["ndcg@10"]
    print(f"\nSciFact train: {len(ds.queries)} queries, {len(ds.docs)} docs\n")
    print("| measure | vectord lexical | bm25s | target |")
    print("|---|---|---|---|")
    print(f"| nDCG@10 (train) | {ndcg_ours:.4f} | {ndcg_ref:.4f} | "
          f"within 0.01 (diff {ndcg_ours - ndcg_ref:+.4f}) |")
    print(f"| p50 / p95 ms, {len(ds.docs)} docs | {pct(took_small, 50):.1f} / "
          f"{pct(took_small, 95):.1f} | | |")
    print(f"| p50 / p95 ms, {args.docs} docs | {pct(took_large, 50):.1f} / "
          f"{pct(took_large, 95):.1f} | | p50 <= 20 |")
    print(f"| p50 / p95 ms, {args.docs} docs, baseline: exhaustive BM25 SQL, no HTTP | "
          f"{pct(took_base, 50):.1f} / {pct(took_base, 95):.1f} | | "
          f"vectord p50 / baseline p50 = {pct(took_large, 50) / pct(took_base, 50):.2f} |")
    print(f"| load s (HTTP upsert), {len(ds.docs)} / {args.docs} docs | "
          f"{load_small:.1f} / {load_large:.1f} | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
