"""A corpus's vector index settings, and its graph rebuilt online with new ones.

`POST /v1/vectors/corpora/{name}/index/settings {"m", "ef_construction", "ef_search",
"exact_scan_rows"}`: `ef_search` and `exact_scan_rows` are the registry row's and apply
to the next search; a new `m` or `ef_construction` starts a background job (a row of
`vectord_reembed`, kind `reindex`, run by the re-embedding jobs' runner: one job a
corpus at a time, its state in PostgreSQL, so a restart resumes it on whichever vectord
takes it first). The job builds a second graph `CONCURRENTLY` (writes and searches go
on, the old graph answering), then one short transaction drops the old graph, names the
new one as the corpus's and records its settings (`switch`).

A space's shared graph (storage/space_index.py) keeps [vectord]'s settings: it serves
searches over several corpora, each of which may name its own; such a search reads it
with the largest `ef_search` of the corpora it covers
(docs/decisions/0300-index-settings-per-corpus.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import psycopg
import structlog
from psycopg import sql
from psycopg.rows import dict_row

from internal.api.responses import IndexSettings, IndexSettingsChanged, Reindexing
from internal.api.vectord import Corpus, IndexSettingsRequest
from internal.common.errors import Conflict, InvalidArgument
from internal.pg import memory
from internal.vectord import tables
from internal.vectord.storage import memory_plan, reembed_sql, schema
from internal.vectord.storage.parts import SELECT_CORPUS_ID, StoreParts

log = structlog.get_logger()

Conn = psycopg.AsyncConnection[Any]

START = """
INSERT INTO vectord_reembed (corpus_id, model, dim, kind, hnsw_m, hnsw_ef_construction)
VALUES (%(id)s, '', %(dim)s, 'reindex', %(m)s, %(efc)s)
ON CONFLICT (corpus_id) DO NOTHING RETURNING corpus_id"""
SET_SETTINGS = """
UPDATE vectord_corpora SET hnsw_m = %(m)s, hnsw_ef_construction = %(ef_construction)s,
       ef_search = %(ef_search)s, exact_scan_rows = %(exact_scan_rows)s WHERE id = %(id)s"""
FINISH = "DELETE FROM vectord_reembed WHERE corpus_id = %(id)s AND kind = 'reindex'"
HAS_INDEX = "SELECT to_regclass(%(name)s) IS NOT NULL"
SET_BUILD_MEMORY = "SELECT set_config('maintenance_work_mem', %s, false)"
# The switch waits at most this long for the searches in flight on the old graph (then
# lets them go and tries again): an ACCESS EXCLUSIVE lock queued on a busy table would
# make every new search wait behind it.
SWITCH_LOCK_TIMEOUT = "2s"
SWITCH_RETRY_SECONDS = 1.0


def next_index(corpus_id: int) -> sql.Identifier:
    """The graph being built (the re-embedding's name: one job a corpus at a time)."""
    return reembed_sql.next_index(corpus_id)


def merged(now: IndexSettings, req: IndexSettingsRequest, field: str = "ef_construction"
           ) -> IndexSettings:
    """The settings asked for, the others as they are; 400 naming `ef_construction` when
    it is under 2 m (pgvector refuses such a graph)."""
    out = IndexSettings(
        m=now.m if req.m is None else req.m,
        ef_construction=now.ef_construction if req.ef_construction is None else req.ef_construction,
        ef_search=now.ef_search if req.ef_search is None else req.ef_search,
        exact_scan_rows=now.exact_scan_rows if req.exact_scan_rows is None else req.exact_scan_rows)
    if out.ef_construction < 2 * out.m:
        raise InvalidArgument(f"{field}: must be at least 2 m ({2 * out.m}), got "
                              f"{out.ef_construction}", field=field)
    return out


class ReindexPart(StoreParts):
    """A corpus's index settings: change them, rebuild its graph, switch to it."""

    async def change_index(self, corpus: Corpus, req: IndexSettingsRequest
                           ) -> IndexSettingsChanged:
        """Apply the settings: at once for the search-time ones (and for a corpus whose
        graph is deferred, built later with them); a background rebuild for a new graph
        (409 when a re-embedding, conversion or rebuild of the corpus runs)."""
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_CORPUS_ID + " FOR UPDATE", {"id": corpus.id})
            row = await cur.fetchone()
            if row is None:
                raise Conflict(f"corpus {corpus.name!r} was deleted meanwhile")
            fresh = Corpus(**row)
            now = self.index_settings(fresh)
            want = merged(now, req)
            graph = (want.m, want.ef_construction) != (now.m, now.ef_construction)
            cur2 = await conn.execute(HAS_INDEX, {"name": f"vectord_items_{int(fresh.id)}_hnsw"})
            built = bool((await cur2.fetchone() or (False,))[0])
            rebuild = graph and built
            kept = (msgspec.structs.replace(want, m=now.m, ef_construction=now.ef_construction)
                    if rebuild else want)
            if rebuild:
                cur2 = await conn.execute(START, {"id": fresh.id, "dim": fresh.dim,
                                                  "m": want.m, "efc": want.ef_construction})
                if await cur2.fetchone() is None:
                    raise Conflict(f"corpus {corpus.name!r} is being re-embedded, converted "
                                   "or re-indexed already", code="reembed_running",
                                   field="index")
            await conn.execute(SET_SETTINGS, {"id": fresh.id, **msgspec.structs.asdict(kept)})
        self._cache.pop(corpus.name, None)
        log.info("index_settings_changed", corpus=corpus.name, rebuild=rebuild,
                 **msgspec.structs.asdict(want))
        return IndexSettingsChanged(
            corpus=corpus.name, index=kept,
            reindex=Reindexing(m=want.m, ef_construction=want.ef_construction) if rebuild else None)

    async def reindex_progress(self, corpus: Corpus) -> Reindexing | None:
        """The rebuild of the corpus's graph under way, if one is."""
        async with self.pool.connection() as conn:
            job = await reembed_sql.job(conn, corpus.id)
        if job is None or job.kind != "reindex" or job.hnsw_m is None:
            return None
        return Reindexing(m=job.hnsw_m, ef_construction=job.hnsw_ef_construction or 0,
                          error=job.error)

    async def reindex_build(self, corpus: Corpus, m: int, efc: int) -> None:
        """The new graph, built CONCURRENTLY beside the old (an invalid leftover of an
        interrupted build dropped first; a valid one is kept: the job resumes at the
        switch)."""
        cid = int(corpus.id)
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                (f"vectord_items_{cid}_hnsw_next",))
            row = await cur.fetchone()
            if row is not None and row[0]:
                return
            if row is not None:
                await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                    next_index(cid)))
            cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                tables.items_table(cid)))
            rows = int((await cur.fetchone() or (0,))[0])
            plan = memory_plan.build_memory(rows, corpus.dim, corpus.precision, m,
                                            memory.machine()[1])
            await conn.execute(SET_BUILD_MEMORY, (memory_plan.setting(plan),))
            await conn.execute("SET max_parallel_maintenance_workers = 2")
            try:
                await conn.execute(schema.hnsw_sql(
                    next_index(cid), tables.items_table(cid),
                    schema.index_key(corpus.precision, corpus.metric), m, efc, concurrently=True))
            finally:
                await conn.execute("RESET maintenance_work_mem")
                await conn.execute("RESET max_parallel_maintenance_workers")

    async def reindex_switch(self, corpus: Corpus, m: int, efc: int) -> bool:
        """In one transaction holding the registry row: the old graph dropped (the table's
        lock: the searches in flight end first; past SWITCH_LOCK_TIMEOUT the switch lets
        them go: False, tried again), the new one named the corpus's, its settings
        recorded, the job done."""
        cid = int(corpus.id)
        async with self.pool.connection() as conn:
            try:
                async with conn.transaction():
                    cur = await conn.execute(SELECT_CORPUS_ID + " FOR UPDATE", {"id": cid})
                    if await cur.fetchone() is None:
                        return True  # deleted meanwhile
                    await conn.execute("SELECT set_config('lock_timeout', %s, true)",
                                       (SWITCH_LOCK_TIMEOUT,))
                    await conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(
                        tables.hnsw_index(cid)))
                    await conn.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                        next_index(cid), tables.hnsw_index(cid)))
                    await conn.execute(
                        "UPDATE vectord_corpora SET hnsw_m = %(m)s, hnsw_ef_construction = %(efc)s "
                        "WHERE id = %(id)s", {"m": m, "efc": efc, "id": cid})
                    await conn.execute(FINISH, {"id": cid})
            except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
                return False
        self._cache.pop(corpus.name, None)
        return True


async def run(store: ReindexPart, corpus_id: int, m: int, efc: int,
              corpus_of: Callable[[int], Awaitable[Corpus | None]]) -> None:
    """One rebuild to its end: the new graph, then the switch (tried again while the
    table stays busy past the switch's lock timeout)."""
    while True:
        corpus = await corpus_of(corpus_id)
        if corpus is None:
            return  # deleted: its indexes went with it
        started = asyncio.get_running_loop().time()
        await store.reindex_build(corpus, m, efc)
        log.info("reindex_built", corpus=corpus.name, m=m, ef_construction=efc,
                 seconds=round(asyncio.get_running_loop().time() - started, 1))
        if await store.reindex_switch(corpus, m, efc):
            log.info("reindex_switched", corpus=corpus.name, m=m, ef_construction=efc)
            return
        await asyncio.sleep(SWITCH_RETRY_SECONDS)
