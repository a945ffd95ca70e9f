"""Benchmark vectord's lexical (BM25) mode against the engines it is compared with.

Starts vectord in-process on a free loopback port (embedded PostgreSQL in a temporary
folder, or LAKEHOUSE_PG_DSN), loads the data sets through the HTTP API, and prints in one
run (issue 15):

- latency p50 / p95 (sequential) and QPS at concurrency 8, on SciFact (5,183 docs) and on
  a corpus of --docs documents (SciFact repeated with new ids), of
  - vectord lexical over HTTP;
  - the same SQL straight to PostgreSQL (vectord's statement, no HTTP, no Python shaping);
  - the exhaustive BM25 SQL (reads every posting of every query lexeme; same scores);
  - a floor: the SQL that only reads the postings of the query's lexemes (no scoring);
    every exact scorer that reads postings in PostgreSQL pays at least this;
  - pg_textsearch (BM25 index with Block-Max WAND, in the same PostgreSQL) on a copy of the
    text in one column, as plain SQL: the in-database engine reference (not exact BM25:
    per-index statistics, quantized document lengths, float4 scores);
  - tantivy in-process (bench-only dependency) as the search-engine reference;
  - before: the statement vectord ran until the static single-corpus form (plpgsql
    statistics and vectord_bm25_top2 for every query), for the ratio against today's;
- nDCG@10 of each on SciFact train, Cranfield dev and CISI dev, and bm25s's beside them
  (issue 14: vectord's lexical mode within 0.01 of it on all three);
- the load time (HTTP upsert with lexical indexing) of both SciFact corpora.

Targets (issue 15): vectord HTTP p50 <= 2.5 ms at 5k and <= 5 ms at 100k; QPS >= 5x
today's in the same run; nDCG@10 within 0.005 of today's.

    .venv/bin/python scripts/bench_lexical.py [--docs 100000] [--queries 300] [--quality-only]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
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
CONCURRENCY = 8
K = 10
Run = dict[str, list[str]]


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


# ---- the systems: each answers (query text) -> top-K ids -------------------------------

Search = Callable[[str], Awaitable[list[str]]]


def http_search(http: aiohttp.ClientSession, base: str, name: str) -> Search:
    async def run(text: str) -> list[str]:
        body = await post(http, f"{base}{C}/{name}/search",
                          {"mode": "lexical", "query_text": text, "k": K})
        return [h["id"] for h in body["hits"]]
    return run


class Conns:
    """CONCURRENCY direct connections, handed out one per concurrent query."""

    def __init__(self, conns: list[psycopg.AsyncConnection[Any]]) -> None:
        self.free = list(conns)

    @classmethod
    async def open(cls, dsn: str) -> Conns:
        return cls([await psycopg.AsyncConnection.connect(dsn, autocommit=True)
                    for _ in range(CONCURRENCY)])

    async def run(self, stmt: Any, params: Any) -> list[tuple[Any, ...]]:
        conn = self.free.pop()
        try:
            return await (await conn.execute(stmt, params)).fetchall()
        finally:
            self.free.append(conn)

    async def close(self) -> None:
        for c in self.free:
            await c.close()


def sql_search(conns: Conns, corpus_id: int, exhaustive: bool) -> Search:
    """vectord's lexical statement (or the exhaustive one), sent straight to PostgreSQL."""
    stmt = lexical.lexical_sql(schema.items_table(corpus_id), corpus_id, ["english"],
                               sql.SQL("TRUE"), False, exhaustive=exhaustive)

    async def run(text: str) -> list[str]:
        params = lexical.bm25_params(text, ["english"], 1.2, 0.75,
                                     lexical.DEFAULT_FIELD_WEIGHTS, K)
        return [str(r[0]) for r in await conns.run(stmt, params)]
    return run


# The statement vectord ran before the static single-corpus form was adopted (issue 15,
# DECISIONS "Lexical speed"): statistics by the plpgsql vectord_bm25_query and the top n
# by vectord_bm25_top2 (dynamic SQL, planned on every call) for every query. Kept here
# so each run measures today's statement against it on the same data.
BEFORE_TOP = """
{stats_cte},
lex AS (
  SELECT s.id, s.score, row_number() OVER (ORDER BY s.score DESC, s.id) AS rank
  FROM lex_q, vectord_bm25_top2({postings_name}, lex_q.lexemes, lex_q.df, lex_q.w,
                                lex_q.avgdl, %(lex_k1)s, %(lex_b)s, %(lex_wa)s, %(lex_wb)s,
                                %(lex_wc)s, %(lex_n)s, {budget}) s)"""


def before_search(conns: Conns, corpus_id: int) -> Search:
    table = schema.items_table(corpus_id)
    bm25 = sql.SQL(BEFORE_TOP).format(
        stats_cte=lexical._stats_cte(corpus_id, ["english"], False),
        postings_name=sql.Literal(f"vectord_items_{int(corpus_id)}_postings"),
        budget=sql.Literal(lexical.TOP_BUDGET))
    stmt = sql.SQL(lexical._LEXICAL_SEARCH).format(
        bm25=bm25, columns=sql.SQL(lexical.ITEM_COLUMNS), table=table)

    async def run(text: str) -> list[str]:
        params = lexical.bm25_params(text, ["english"], 1.2, 0.75,
                                     lexical.DEFAULT_FIELD_WEIGHTS, K)
        return [str(r[0]) for r in await conns.run(stmt, params)]
    return run


def floor_search(conns: Conns, corpus_id: int) -> Search:
    """Reads the postings of the query's lexemes and nothing more (answers no ids)."""
    stmt = sql.SQL("SELECT count(*) FROM {p} p WHERE p.lexeme = ANY("
                   "tsvector_to_array(to_tsvector('english', %(q)s)))").format(
        p=lexical.postings_table(corpus_id))

    async def run(text: str) -> list[str]:
        await conns.run(stmt, {"q": text})
        return []
    return run


async def pg_textsearch_setup(dsn: str, corpus_id: int) -> str:
    """A copy of the corpus's text in one column with a pg_textsearch BM25 index.

    pg_textsearch 1.0 indexes a plain column with one text configuration (no expression
    index), so the copy stands for the stored column an adoption would need.
    """
    name = f"bench_pts_{corpus_id}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_textsearch")
        await conn.execute(sql.SQL(
            "CREATE TABLE {t} AS SELECT id, coalesce(title, '') || ' ' || text || ' ' || "
            "array_to_string(tags, ' ') AS body FROM {i}").format(
            t=sql.Identifier(name), i=schema.items_table(corpus_id)))
        await conn.execute(sql.SQL(
            "CREATE INDEX {x} ON {t} USING bm25 (body) "
            "WITH (text_config = 'english', k1 = 1.2, b = 0.75)").format(
            x=sql.Identifier(f"{name}_bm25"), t=sql.Identifier(name)))
        await conn.execute(sql.SQL("VACUUM ANALYZE {t}").format(t=sql.Identifier(name)))
    return name


def pg_textsearch_search(conns: Conns, table: str) -> Search:
    stmt = sql.SQL("SELECT id FROM {t} ORDER BY body <@> to_bm25query(%(q)s, {x}) "
                   "LIMIT {k}").format(t=sql.Identifier(table),
                                       x=sql.Literal(f"{table}_bm25"), k=sql.Literal(K))

    async def run(text: str) -> list[str]:
        return [str(r[0]) for r in await conns.run(stmt, {"q": text})]
    return run


class Tantivy:
    """tantivy in-process: English stemming tokenizer over title + text, BM25 k1 1.2 b 0.75."""

    def __init__(self, docs: list[beir.Doc], total: int) -> None:
        import tantivy  # type: ignore[import-not-found,import-untyped,unused-ignore]

        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw")
        sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
        self.index = tantivy.Index(sb.build())
        writer = self.index.writer(heap_size=200_000_000, num_threads=1)
        for i in range(total):
            d = docs[i % len(docs)]
            rep = i // len(docs)
            writer.add_document(tantivy.Document(id=d.id if rep == 0 else f"{d.id}~{rep}",
                                                 body=f"{d.title} {d.text}"))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.pool = ThreadPoolExecutor(CONCURRENCY)

    def query(self, text: str) -> list[str]:
        words = re.sub(r"[^\w]+", " ", text).strip() or "_"
        q = self.index.parse_query(words, ["body"])
        found = self.searcher.search(q, K)
        return [self.searcher.doc(addr)["id"][0] for _, addr in found.hits]

    def search(self) -> Search:
        async def run(text: str) -> list[str]:
            return self.query(text)
        return run

    def qps(self, texts: list[str]) -> float:
        started = time.perf_counter()
        list(self.pool.map(self.query, texts))
        return len(texts) / (time.perf_counter() - started)


# ---- measuring ----------------------------------------------------------------------

async def sequential(search: Search, queries: dict[str, str]) -> tuple[Run, list[float]]:
    run: Run = {}
    took: list[float] = []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        run[qid] = await search(text)
        took.append((time.perf_counter() - t0) * 1000)
    return run, took


async def qps(search: Search, texts: list[str]) -> float:
    """Queries per second with CONCURRENCY queries in flight."""
    todo = list(texts)

    async def worker() -> None:
        while todo:
            await search(todo.pop())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return len(texts) / (time.perf_counter() - started)


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else values[0]


def ndcg(run: Run, qrels: dict[str, dict[str, int]]) -> float:
    return metrics.evaluate(run, qrels)["ndcg@10"]


def bm25s_run(docs: list[beir.Doc], queries: dict[str, str]) -> Run:
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
    results, _ = retriever.retrieve(tokens, k=K, show_progress=False)
    return {qid: [docs[int(results[i, j])].id for j in range(K)] for i, qid in enumerate(qids)}


_PG_TOKENS = sql.SQL(
    "SELECT u.o, x.lexeme, cardinality(x.positions) "
    "FROM unnest(%(t)s::text[]) WITH ORDINALITY AS u(t, o), "
    "unnest(to_tsvector('english'::regconfig, u.t)) x")


async def pg_tokens(conns: Conns, texts: list[str]) -> list[list[str]]:
    """Each text as PostgreSQL's English analyzer sees it (vectord's lexemes), each lexeme
    repeated as often as it occurs."""
    out: list[list[str]] = [[] for _ in texts]
    for start in range(0, len(texts), 500):
        for o, lexeme, n in await conns.run(_PG_TOKENS, {"t": texts[start:start + 500]}):
            out[start + int(o) - 1] += [str(lexeme)] * int(n)
    return out


async def bm25s_pg_run(conns: Conns, docs: list[beir.Doc], queries: dict[str, str]) -> Run:
    """bm25s (same k1, b, idf) over PostgreSQL's lexemes instead of its own tokenizer: the
    scoring of vectord and bm25s compared with the analyzer taken out."""
    import bm25s

    corpus = await pg_tokens(conns, [f"{d.title} {d.text}" for d in docs])
    qids = list(queries)
    tokens = await pg_tokens(conns, [queries[q] for q in qids])
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(corpus, show_progress=False)
    results, _ = retriever.retrieve(tokens, k=K, show_progress=False)
    return {qid: [docs[int(results[i, j])].id for j in range(K)] for i, qid in enumerate(qids)}


SYSTEMS = ("vectord lexical, HTTP", "same SQL, direct", "exhaustive BM25 SQL, direct",
           "floor: read the query's postings, SQL", "pg_textsearch SQL (reference)",
           "tantivy in-process (reference)", "before: plpgsql statistics + top2, direct")


async def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--docs", type=int, default=100_000, help="size of the large corpus")
    ap.add_argument("--queries", type=int, default=300, help="queries timed per corpus")
    ap.add_argument("--quality-only", action="store_true",
                    help="nDCG@10 only: no timings, no large corpus")
    args = ap.parse_args()

    data = Path(args.data)
    sets = {"SciFact train": beir.load(data / "scifact", "train"),
            "Cranfield dev": beir.load(data / "cranfield", "dev"),
            "CISI dev": beir.load(data / "cisi", "dev")}
    sf = sets["SciFact train"]
    dsn_env = os.environ.get("LAKEHOUSE_PG_DSN", "")
    tmp = tempfile.mkdtemp(prefix="bench-lexical-")
    cfg = Config()
    cfg = Config(vectord=type(cfg.vectord)(dsn=dsn_env, data_dir=f"{tmp}/pg", pool_min=1,
                                           pool_max=CONCURRENCY))
    runner = web.AppRunner(make_app(cfg))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    store: Store = runner.app[STORE]
    dsn = str(store.pool.dsn)
    pid = os.getpid()
    quality: dict[str, dict[str, float]] = {}
    speed: dict[str, dict[str, tuple[float, float, float]]] = {}
    loads: dict[str, float] = {}
    names: list[str] = []
    conns = await Conns.open(dsn)
    try:
        async with aiohttp.ClientSession() as http:
            for label, ds in sets.items():
                name = f"bench_lex_{re.sub(r'[^a-z]', '', label.lower())}_{pid}"
                names.append(name)
                loads[label] = await load(http, base, name, ds.docs, len(ds.docs))
                cid = (await store.corpus(name)).id
                pts = await pg_textsearch_setup(dsn, cid)
                tv = Tantivy(ds.docs, len(ds.docs))
                systems: dict[str, Search] = {
                    SYSTEMS[0]: http_search(http, base, name),
                    SYSTEMS[1]: sql_search(conns, cid, False),
                    SYSTEMS[4]: pg_textsearch_search(conns, pts),
                    SYSTEMS[5]: tv.search(),
                    SYSTEMS[6]: before_search(conns, cid)}
                quality[label] = {}
                for sys_name, search in systems.items():
                    run, _ = await sequential(search, ds.queries)
                    quality[label][sys_name] = ndcg(run, ds.qrels)
                quality[label]["bm25s"] = ndcg(bm25s_run(ds.docs, ds.queries), ds.qrels)
                quality[label]["bm25s, PostgreSQL's lexemes"] = ndcg(
                    await bm25s_pg_run(conns, ds.docs, ds.queries), ds.qrels)
                if label == "SciFact train" and not args.quality_only:
                    speed[f"{len(ds.docs):,} docs"] = await timings(
                        http, base, name, conns, cid, pts, tv, ds.queries, args.queries)
            if not args.quality_only:
                big = f"bench_lex_big_{pid}"
                names.append(big)
                loads[f"SciFact x{args.docs / len(sf.docs):.1f}"] = await load(
                    http, base, big, sf.docs, args.docs)
                cid = (await store.corpus(big)).id
                pts = await pg_textsearch_setup(dsn, cid)
                tv = Tantivy(sf.docs, args.docs)
                speed[f"{args.docs:,} docs"] = await timings(
                    http, base, big, conns, cid, pts, tv, sf.queries, args.queries)
            for name in names:
                async with http.delete(f"{base}{C}/{name}"):
                    pass
    finally:
        await conns.close()
        await runner.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    print("\nnDCG@10 (BM25 k1 1.2, b 0.75)\n")
    cols = [SYSTEMS[0], SYSTEMS[1], SYSTEMS[6], SYSTEMS[4], SYSTEMS[5], "bm25s",
            "bm25s, PostgreSQL's lexemes"]
    print("| data set | " + " | ".join(cols) + " | vectord - bm25s |")
    print("|---" * (len(cols) + 2) + "|")
    for label, row in quality.items():
        print(f"| {label} ({len(sets[label].queries)} q, {len(sets[label].docs)} docs) | "
              + " | ".join(f"{row[c]:.4f}" if c in row else "" for c in cols)
              + f" | {row[SYSTEMS[0]] - row['bm25s']:+.4f} |")
    if not speed:
        return 0
    print(f"\nLatency (sequential, ms) and QPS at concurrency {CONCURRENCY}; "
          f"{args.queries} SciFact queries per corpus\n")
    print("| system | " + " | ".join(f"{s}: p50 / p95 ms | {s}: QPS" for s in speed) + " |")
    print("|---" * (2 * len(speed) + 1) + "|")
    for sys_name in SYSTEMS:
        cells = []
        for figures in speed.values():
            p50, p95, q = figures[sys_name]
            cells += [f"{p50:.2f} / {p95:.2f}", f"{q:.0f}"]
        print(f"| {sys_name} | " + " | ".join(cells) + " |")
    print("\nRatios in this run (vectord HTTP against the others, p50):")
    for size, figures in speed.items():
        ours = figures[SYSTEMS[0]][0]
        print(f"- {size}: HTTP / same SQL {ours / figures[SYSTEMS[1]][0]:.2f}, "
              f"HTTP / pg_textsearch {ours / figures[SYSTEMS[4]][0]:.2f}, "
              f"HTTP / tantivy {ours / figures[SYSTEMS[5]][0]:.2f}, "
              f"floor / same SQL {figures[SYSTEMS[3]][0] / figures[SYSTEMS[1]][0]:.2f}, "
              f"before / same SQL {figures[SYSTEMS[6]][0] / figures[SYSTEMS[1]][0]:.2f} "
              f"(same SQL QPS {figures[SYSTEMS[1]][2] / figures[SYSTEMS[6]][2]:.2f}x before's)")
    print("\nLoad (HTTP upsert with lexical indexing, no embedding): "
          + ", ".join(f"{k} {v:.1f} s" for k, v in loads.items()))
    return 0


async def timings(http: aiohttp.ClientSession, base: str, name: str, conns: Conns, cid: int,
                  pts: str, tv: Tantivy, queries: dict[str, str], n: int
                  ) -> dict[str, tuple[float, float, float]]:
    """(p50, p95, QPS) of every system on one corpus; systems alternate query by query."""
    searches: dict[str, Search] = {
        SYSTEMS[0]: http_search(http, base, name),
        SYSTEMS[1]: sql_search(conns, cid, False),
        SYSTEMS[2]: sql_search(conns, cid, True),
        SYSTEMS[3]: floor_search(conns, cid),
        SYSTEMS[4]: pg_textsearch_search(conns, pts),
        SYSTEMS[5]: tv.search(),
        SYSTEMS[6]: before_search(conns, cid)}
    timed = list(queries.values())[:n]
    took: dict[str, list[float]] = {s: [] for s in searches}
    for text in timed[:20]:  # warm
        for search in searches.values():
            await search(text)
    for text in timed:
        for s, search in searches.items():
            t0 = time.perf_counter()
            await search(text)
            took[s].append((time.perf_counter() - t0) * 1000)
    out: dict[str, tuple[float, float, float]] = {}
    for s, search in searches.items():
        q = tv.qps(timed) if s == SYSTEMS[5] else await qps(search, timed)
        out[s] = (pct(took[s], 50), pct(took[s], 95), q)
    return out


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
