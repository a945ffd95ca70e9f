"""vectord's lexical (BM25) mode: its in-memory index against the SQL engine, the SQL
itself, floors, pg_textsearch, tantivy and bm25s; quality and speed, one run.

Two vectords over one embedded PostgreSQL, each in its own process as deployed: the
in-memory index (the default, `lexical_engine = "memory"`) and the SQL engine (`"sql"`,
the reference); this process is the client. nDCG@10 of each system on SciFact train,
Cranfield dev and CISI dev, bm25s's beside them. Then on SciFact and on corpora of each
--docs size (SciFact repeated with new ids): p50 / p95 one query at a time, every system
in turn query by query, after a warming pass (the in-memory index's own p50 / p95 there
is "cold"), and QPS at concurrency 8 (median of 5 rounds); the same SQL straight to
PostgreSQL, the exhaustive BM25 SQL (up to 200k docs), a floor that reads the query's
postings, a bare HTTP floor answering a stored response; the in-memory index's top-10
agreement with the exhaustive SQL; its memory; the load time of each corpus. With
--baseline the baseline's vectord loads the same corpora (up to 200k), ABBA; --load-only:
only that.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import psutil
import psycopg
from psycopg import sql

from bench.harness import Run
from bench.harness.http import CORPORA, call, post
from bench.harness.pg import corpus_id
from bench.harness.stacks import daemon
from bench.harness.timing import pct, qps
from bench.peers.floors import floor
from bench.peers.lexical import Tantivy, bm25s_run, repeated
from internal.evaluation import beir, metrics
from internal.pg import embedded
from internal.vectord import tables
from internal.vectord.lexical import sql_index

OPTIONS = {"docs": ("100000", "sizes of the large corpora, comma-separated"), "queries": 300,
           "quality_only": False, "load_only": (False, "with --baseline: only the loads, ABBA")}
QUICK = {"docs": "20000", "queries": 60}
K, CONCURRENCY, QPS_ROUNDS, EXHAUSTIVE_MAX = 10, 8, 5, 200_000
D1, BEFORE, SQL_DIRECT, EXHAUSTIVE, FLOOR, HTTP_FLOOR, PTS, TANTIVY = (
    "in-memory index, vectord HTTP", "SQL engine, vectord HTTP", "same SQL, direct",
    "exhaustive BM25 SQL, direct", "floor: read the query's postings, SQL",
    "floor: HTTP only (a bare aiohttp route answering a stored search response)",
    "pg_textsearch SQL (reference)", "tantivy in-process (reference)")
Search = Callable[[str], Awaitable[list[str]]]


async def load(http: aiohttp.ClientSession, base: str, name: str, docs: list[beir.Doc], total: int) -> float:
    """The corpus created and `total` docs upserted (docs repeated with new ids): seconds."""
    await post(http, f"{base}{CORPORA}", {"name": name, "dim": 1, "metric": "l2", "language": "english",
                                          "defer_index": True})
    rows, started = repeated(docs, total), time.perf_counter()
    for i in range(0, total, 1000):
        await post(http, f"{base}{CORPORA}/{name}/items", {"items": [
            {"id": doc_id, "vector": [0.0], "title": d.title, "text": d.text} for doc_id, d in rows[i:i + 1000]]})
    return time.perf_counter() - started


class Direct:
    """CONCURRENCY connections straight to PostgreSQL, one per concurrent query."""

    def __init__(self, conns: list[psycopg.AsyncConnection[Any]]) -> None:
        self.free = conns

    async def run(self, stmt: Any, params: Any) -> list[tuple[Any, ...]]:
        conn = self.free.pop()
        try:
            cur = await conn.execute(stmt, params)
            return await cur.fetchall() if cur.description else []
        finally:
            self.free.append(conn)

    def bm25(self, cid: int, exhaustive: bool) -> Search:
        stmt = sql_index.lexical_sql(tables.items_table(cid), cid, ["english"], sql.SQL("TRUE"), False,
                                     exhaustive=exhaustive)
        return lambda text: self.ids(stmt, sql_index.bm25_params(text, ["english"], 1.2, 0.75,
                                                                 sql_index.DEFAULT_FIELD_WEIGHTS, K))

    def postings(self, cid: int) -> Search:
        stmt = sql.SQL("SELECT count(*) FROM {p} p WHERE p.lexeme = ANY(tsvector_to_array("
                       "to_tsvector('english', %(q)s)))").format(p=sql_index.postings_table(cid))
        return lambda text: self.ids(stmt, {"q": text}, none=True)

    async def pg_textsearch(self, cid: int) -> Search:
        """A copy of the corpus's text in one column with a pg_textsearch BM25 index."""
        t = sql.Identifier(f"bench_pts_{cid}")
        await self.run("CREATE EXTENSION IF NOT EXISTS pg_textsearch", None)
        await self.run(sql.SQL("CREATE TABLE {t} AS SELECT id, coalesce(title, '') || ' ' || text || ' ' || "
                               "array_to_string(tags, ' ') AS body FROM {i}").format(t=t, i=tables.items_table(cid)), None)
        await self.run(sql.SQL("CREATE INDEX {x} ON {t} USING bm25 (body) WITH (text_config = 'english', "
                               "k1 = 1.2, b = 0.75)").format(x=sql.Identifier(f"bench_pts_{cid}bm25"), t=t), None)
        await self.run(sql.SQL("VACUUM ANALYZE {t}").format(t=t), None)
        stmt = sql.SQL("SELECT id FROM {t} ORDER BY body <@> to_bm25query(%(q)s, {x}) LIMIT {k}").format(
            t=t, x=sql.Literal(f"bench_pts_{cid}bm25"), k=sql.Literal(K))
        return lambda text: self.ids(stmt, {"q": text})

    async def ids(self, stmt: Any, params: Any, none: bool = False) -> list[str]:
        rows = await self.run(stmt, params)
        return [] if none else [str(r[0]) for r in rows]

    async def lexemes(self, texts: list[str]) -> list[list[str]]:
        """Each text as PostgreSQL's English analyzer sees it, a lexeme as often as it occurs."""
        out: list[list[str]] = [[] for _ in texts]
        stmt = ("SELECT u.o, x.lexeme, cardinality(x.positions) FROM unnest(%(t)s::text[]) WITH ORDINALITY "
                "AS u(t, o), unnest(to_tsvector('english'::regconfig, u.t)) x")
        for start in range(0, len(texts), 500):
            for o, lexeme, n in await self.run(stmt, {"t": texts[start:start + 500]}):
                out[start + int(o) - 1] += [str(lexeme)] * int(n)
        return out


async def sequential(search: Search, queries: dict[str, str]) -> dict[str, list[str]]:
    return {qid: await search(text) for qid, text in queries.items()}


async def timings(run: Run, http: aiohttp.ClientSession, systems: dict[str, Search], tv: Tantivy,
                  d1: tuple[str, int], direct: Direct, cid: int, texts: list[str], docs: int) -> dict[str, Any]:
    """(p50, p95, QPS) per system on one corpus, the cold pass, the agreement, the memory."""
    base, pid = d1
    rss0 = psutil.Process(pid).memory_info().rss
    mb0 = (await call(http, "GET", f"{base}/readyz"))["components"]["lexical_index"]["mb"]
    cold: list[float] = []
    for text in texts:  # the warming pass: the index loads each lexeme's postings on first use
        for s, search in systems.items():
            t0 = time.perf_counter()
            await search(text)
            if s == D1:
                cold.append((time.perf_counter() - t0) * 1000)
    took: dict[str, list[float]] = {s: [] for s in systems}
    for text in texts:
        for s, search in systems.items():
            t0 = time.perf_counter()
            await search(text)
            took[s].append((time.perf_counter() - t0) * 1000)
    rates: dict[str, list[float]] = {s: [] for s in systems}
    for _ in range(QPS_ROUNDS):  # every system once a round in turn, the median round kept
        for s, search in systems.items():
            rates[s].append(tv.qps(texts) if s == TANTIVY else await qps(search, texts, CONCURRENCY))
    reference = systems.get(EXHAUSTIVE, direct.bm25(cid, False))
    same = sum([await systems[D1](t) == await reference(t) for t in texts])
    mb1 = (await call(http, "GET", f"{base}/readyz"))["components"]["lexical_index"]["mb"]
    return {"figures": {s: (pct(took[s], 50), pct(took[s], 95), statistics.median(rates[s])) for s in systems},
            "cold": (pct(cold, 50), pct(cold, 95)), "agree": f"{same} of {len(texts)}",
            "memory": f"cache {mb1:.1f} MB ({mb1 - mb0:.1f} MB loaded by these queries), vectord RSS "
                      f"growth {(psutil.Process(pid).memory_info().rss - rss0) / 2**20:.0f} MB"}


async def main(run: Run) -> None:
    a = run.args
    sizes = [int(x) for x in a.docs.split(",") if x.strip()]
    sets = {"SciFact train": ("scifact", "train"), "Cranfield dev": ("cranfield", "dev"), "CISI dev": ("cisi", "dev")}
    sets_ = {label: beir.load(run.need("data", n), s) for label, (n, s) in sets.items()}
    sf = sets_["SciFact train"]
    pg = embedded.start(run.folder / "pg")
    env = {"LAKEHOUSE_VECTORD_DSN": pg.dsn, "LAKEHOUSE_VECTORD_POOL_MIN": "1",
           "LAKEHOUSE_VECTORD_POOL_MAX": str(CONCURRENCY), "LAKEHOUSE_LOG_LEVEL": "info"}
    try:
        with contextlib.ExitStack() as held:
            mem = held.enter_context(daemon("vectord", env, path="/readyz"))
            sqle = held.enter_context(daemon("vectord", {**env, "LAKEHOUSE_VECTORD_LEXICAL_ENGINE": "sql"},
                                             path="/readyz"))
            direct = Direct([await psycopg.AsyncConnection.connect(pg.dsn, autocommit=True)
                             for _ in range(CONCURRENCY)])
            async with aiohttp.ClientSession() as http:
                def via(base: str, name: str) -> Search:
                    async def one(text: str) -> list[str]:
                        out = await post(http, f"{base}{CORPORA}/{name}/search",
                                         {"mode": "lexical", "query_text": text, "k": K})
                        return [h["id"] for h in out["hits"]]
                    return one

                async def baseline_loads(size: int) -> None:
                    took: dict[str, list[float]] = {"this": [], "baseline": []}
                    for i, side in enumerate(("this", "baseline", "baseline", "this")):
                        if side == "this":
                            took[side].append(await load(http, mem.base, f"bench_lex_load{size}_{i}", sf.docs, size))
                            await call(http, "DELETE", f"{mem.base}{CORPORA}/bench_lex_load{size}_{i}")
                            continue
                        where = run.folder / f"pg-baseline-{i}"
                        with daemon("vectord", {"LAKEHOUSE_VECTORD_DATA_DIR": str(where), "LAKEHOUSE_VECTORD_DSN": "",
                                                "LAKEHOUSE_LOG_LEVEL": "warning"}, run.baseline, "/readyz") as b:
                            took[side].append(await load(http, b.base, f"bench_lex_baseline{size}", sf.docs, size))
                    mine, theirs = statistics.mean(took["this"]), statistics.mean(took["baseline"])
                    run.say(f"load of {size:,}, mean of two: this {mine:.1f} s, baseline {theirs:.1f} s, "
                            f"this / baseline {mine / theirs:.2f}")

                if a.load_only:
                    if run.baseline is None:
                        raise SystemExit("--load-only: give --baseline DIR")
                    for size in sizes:
                        await baseline_loads(size)
                    return
                quality, speed, loads = {}, {}, {}
                corpora = [(label, ds, ds.docs, len(ds.docs)) for label, ds in sets_.items()]
                corpora += [] if a.quality_only else [(f"SciFact x{n / len(sf.docs):.1f} ({n:,})", sf, sf.docs, n)
                                                      for n in sizes]
                for label, ds, docs, total in corpora:
                    name = f"bench_lex_{len(loads)}"
                    loads[label] = await load(http, mem.base, name, docs, total)
                    cid = corpus_id(pg.dsn, name)
                    tv = Tantivy(docs, total, K, CONCURRENCY)
                    systems = {D1: via(mem.base, name), BEFORE: via(sqle.base, name),
                               SQL_DIRECT: direct.bm25(cid, False), FLOOR: direct.postings(cid),
                               PTS: await direct.pg_textsearch(cid), TANTIVY: tv.search()}
                    if total <= EXHAUSTIVE_MAX:
                        systems[EXHAUSTIVE] = direct.bm25(cid, True)
                    if total == len(docs):
                        quality[label] = {s: metrics.evaluate(await sequential(systems[s], ds.queries),
                                                              ds.qrels)["ndcg@10"]
                                          for s in (D1, BEFORE, EXHAUSTIVE, PTS, TANTIVY)}
                        texts = [f"{d.title} {d.text}" for d in docs]
                        quality[label]["bm25s"] = metrics.evaluate(bm25s_run(texts, docs, ds.queries, K, True),
                                                                   ds.qrels)["ndcg@10"]
                        quality[label]["bm25s, PostgreSQL's lexemes"] = metrics.evaluate(bm25s_run(
                            await direct.lexemes(texts), docs, dict(zip(ds.queries, await direct.lexemes(
                                list(ds.queries.values())), strict=True)), K, False), ds.qrels)["ndcg@10"]
                    if not a.quality_only and (ds is sf):
                        body = run.folder / "answer.json"
                        async with http.post(f"{mem.base}{CORPORA}/{name}/search", json={
                                "mode": "lexical", "query_text": next(iter(sf.queries.values())), "k": K}) as r:
                            body.write_bytes(await r.read())
                        with floor("answer", "--body", str(body)) as f:
                            systems[HTTP_FLOOR] = lambda t, f=f: post(http, f"{f}/search", {"query_text": t})
                            speed[f"{total:,} docs"] = await timings(run, http, systems, tv,
                                                                     (mem.base, mem.proc.pid), direct, cid,
                                                                     list(sf.queries.values())[:a.queries], total)
                        if run.baseline is not None and total != len(docs) and total <= EXHAUSTIVE_MAX:
                            await baseline_loads(total)
    finally:
        pg.stop()
    cols = [D1, BEFORE, EXHAUSTIVE, PTS, TANTIVY, "bm25s", "bm25s, PostgreSQL's lexemes"]
    run.table("nDCG@10 (BM25 k1 1.2, b 0.75)", ["data set", *(f"{c}:.4f" for c in cols), "in-memory - SQL engine:+.4f"],
              [(f"{label} ({len(sets_[label].queries)} q, {len(sets_[label].docs)} docs)", *(row.get(c) for c in cols),
                row[D1] - row[BEFORE]) for label, row in quality.items()])
    if speed:
        names = [D1, BEFORE, SQL_DIRECT, EXHAUSTIVE, FLOOR, HTTP_FLOOR, PTS, TANTIVY]
        run.table(f"Latency (sequential, ms, after one warming pass) and QPS at concurrency {CONCURRENCY} "
                  f"(median of {QPS_ROUNDS} rounds); {a.queries} SciFact queries a corpus",
                  ["system", *(c for s in speed for c in (f"{s}: p50 ms:.2f", f"{s}: p95 ms:.2f", f"{s}: QPS:.0f"))],
                  [(n, *(v for got in speed.values() for v in got["figures"].get(n, (None,) * 3))) for n in names])
        for size, got in speed.items():
            f = got["figures"]
            run.say(f"- {size}: in-memory cold pass p50 / p95 {got['cold'][0]:.2f} / {got['cold'][1]:.2f} ms; "
                    f"p50 in-memory / SQL engine {f[D1][0] / f[BEFORE][0]:.2f}, / tantivy {f[D1][0] / f[TANTIVY][0]:.2f}, "
                    f"/ pg_textsearch {f[D1][0] / f[PTS][0]:.2f}; QPS in-memory / SQL engine "
                    f"{f[D1][2] / f[BEFORE][2]:.2f}x; exact top 10 agreeing: {got['agree']}; {got['memory']}")
    run.say("Load (HTTP upsert with lexical indexing, no embedding): "
            + ", ".join(f"{k} {v:.1f} s" for k, v in loads.items()))
