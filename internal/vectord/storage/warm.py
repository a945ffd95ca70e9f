"""Warm after a start or a failover: the corpora's indexes and tables read back into
memory in the background, within a budget and a deadline, while searches answer.

What is read, in order (each kind smallest first, so more corpora are warm sooner):
every corpus's vector index, the shared graphs of the embedding spaces, the items
tables, then the BM25 postings' keys (what lexical searches read). With the data
directory readable here (the embedded server), the files are read straight
(internal.pg.prewarm); otherwise each corpus answers a few hundred searches by stored
vectors picked at random, which walk its graph (measured at 1M: 7.5 s, then the first
searches' p95 7.5 ms; docs/decisions/0159-warm-up-reads-files.md)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from psycopg import sql

from internal.api.responses import Warmup
from internal.config import VectordConfig
from internal.pg import memory, prewarm
from internal.vectord import tables
from internal.vectord.storage import memory_plan, schema
from internal.vectord.storage.store import Store

log = structlog.get_logger()

# The relations a warm-up reads, in its order: (kind, corpora count, relation name).
RELATIONS = """
WITH rel AS (
  SELECT 1 AS kind, c.id, 'vectord_items_' || c.id || '_hnsw' AS name FROM vectord_corpora c
  UNION ALL
  SELECT 2, s.id, 'vectord_space_' || s.id || '_hnsw' FROM vectord_spaces s
  UNION ALL
  SELECT 3, c.id, 'vectord_items_' || c.id FROM vectord_corpora c
  UNION ALL
  SELECT 4, c.id, 'vectord_items_' || c.id || '_postings_pkey' FROM vectord_corpora c)
SELECT name FROM rel WHERE to_regclass(name) IS NOT NULL
ORDER BY kind, pg_relation_size(to_regclass(name)), id"""
CORPORA = """
SELECT c.id, c.metric, greatest(coalesce(t.reltuples, 0), 1)
FROM vectord_corpora c LEFT JOIN pg_class t ON t.oid = to_regclass('vectord_items_' || c.id)
ORDER BY 3, c.id"""
SAMPLE = "SELECT embedding FROM {t} TABLESAMPLE SYSTEM (%(pct)s) LIMIT %(n)s"
SEARCH = "SELECT id FROM {t} ORDER BY embedding {op} %(q)s LIMIT 10"
QUERIES = 500  # searches a corpus when the files cannot be read
POLL_SECONDS = 1.0  # how often a failover or a restarted server is looked for


class Warmer:
    """Runs a warm-up at start and after each leader change or server restart."""

    def __init__(self, store: Store, cfg: VectordConfig) -> None:
        self.store, self.cfg = store, cfg
        self.state = Warmup(state="waiting")
        self._progress = prewarm.Progress()
        self._started = 0.0

    def status(self) -> Warmup:
        """The last warm-up as it stands (bytes read so far while one runs)."""
        s = self.state
        if s.state != "warming":
            return s
        return Warmup(state="warming", method=s.method, done_bytes=self._progress.bytes,
                      budget_bytes=s.budget_bytes, corpora=s.corpora,
                      seconds=round(time.monotonic() - self._started, 1))

    async def run_forever(self, changes: Any = None) -> None:
        """Warm now, then again whenever `changes()` (leader changes so far) moves or the
        server comes back from being down."""
        if self.cfg.warm_seconds <= 0:
            self.state = Warmup(state="done", error="off ([vectord] warm_seconds = 0)")
            return
        seen = changes() if changes else 0
        was_down = False
        while True:
            try:
                await self.warm()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reported; searches are served cold meanwhile
                log.warning("warmup_failed", error=str(exc)[:300])
                self.state = Warmup(state="failed", error=str(exc)[:300])
            while True:
                await asyncio.sleep(POLL_SECONDS)
                now = changes() if changes else 0
                down = self.store.pool.down
                if now != seen or (was_down and not down):
                    seen, was_down = now, down
                    break
                was_down = was_down or down

    async def warm(self) -> None:
        self._started = time.monotonic()
        deadline = self._started + self.cfg.warm_seconds
        budget = memory_plan.warm_budget(self.cfg.warm_mb, memory.machine()[1])
        async with self.store.pool.connection() as conn:
            cur = await conn.execute(RELATIONS)
            names = [str(r[0]) for r in await cur.fetchall()]
            files = await prewarm.relation_files(conn, names)
            cur = await conn.execute("SELECT count(*) FROM vectord_corpora")
            row = await cur.fetchone()
        corpora = int(row[0]) if row else 0
        self._progress = prewarm.Progress()
        if files is not None:
            self.state = Warmup(state="warming", method="files", budget_bytes=budget,
                                corpora=corpora)
            got = await asyncio.to_thread(prewarm.read, files, budget, deadline, self._progress)
            note = got.stopped
        else:
            self.state = Warmup(state="warming", method="queries", budget_bytes=budget,
                                corpora=corpora)
            note = await self._by_queries(deadline)
        seconds = round(time.monotonic() - self._started, 1)
        self.state = Warmup(state="done", method=self.state.method,
                            done_bytes=self._progress.bytes, budget_bytes=budget,
                            seconds=seconds, corpora=corpora,
                            error=f"stopped at the {note}" if note else None)
        log.info("warmup_done", method=self.state.method, mib=self._progress.bytes // 2**20,
                 seconds=seconds, corpora=corpora, stopped=note or None)

    async def _by_queries(self, deadline: float) -> str:
        """Searches by stored vectors, QUERIES a corpus, until the deadline; "" or "deadline"."""
        async with self.store.pool.connection() as conn:
            cur = await conn.execute(CORPORA)
            corpora = list(await cur.fetchall())
        for cid, metric, rows in corpora:
            table = tables.items_table(int(cid))
            # Twice the rows wanted, as a share of the table's pages (SYSTEM samples pages).
            pct = min(100.0, 200.0 * QUERIES / float(rows))
            async with self.store.pool.connection() as conn:
                cur = await conn.execute(sql.SQL(SAMPLE).format(t=table),
                                         {"pct": pct, "n": QUERIES})
                vectors = [r[0] for r in await cur.fetchall()]
                stmt = sql.SQL(SEARCH).format(t=table, op=sql.SQL(schema.OPERATOR[str(metric)]))
                for q in vectors:
                    if time.monotonic() > deadline:
                        return "deadline"
                    await conn.execute(stmt, {"q": q})
            self._progress.relations += 1
        return ""
