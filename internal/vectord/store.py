"""vectord's data access: the corpus registry and each corpus's items table."""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg
import structlog
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from internal.api.vectord import Corpus, Item
from internal.common.errors import Conflict, InvalidArgument, NotFound, Unavailable
from internal.common.hashing import content_hash
from internal.config import VectordConfig
from internal.pg.replicas import ReplicaRouter
from internal.pg.resilient import ResilientPool
from internal.vectord import lexical, reembed_store, schema, space_index
from internal.vectord.filters import TRUE, escape_like, is_filtered, like_prefix
from internal.vectord.lexindex import LexIndex

T = TypeVar("T")
log = structlog.get_logger()
Conn = AsyncConnection[Any]

# How long a registry row read by this replica is trusted; another replica may have
# set the model label or dropped the corpus meanwhile (a dropped table is noticed at
# once: UndefinedTable makes us re-read the registry and retry).
CORPUS_TTL_SECONDS = 5.0
# A search on a standby waits this long for the primary's registry row before it uses the
# row it has (older than CORPUS_TTL_SECONDS) rather than fail with a hung primary.
STALE_REGISTRY_AFTER = 1.0

CORPUS_COLUMNS = "id, name, dim, metric, language, model, keyword_index, created_at, space_id"
SELECT_CORPUS = f"SELECT {CORPUS_COLUMNS} FROM vectord_corpora WHERE name = %(name)s"
SELECT_CORPUS_ID = f"SELECT {CORPUS_COLUMNS} FROM vectord_corpora WHERE id = %(id)s"
LIST_CORPORA = f"SELECT {CORPUS_COLUMNS} FROM vectord_corpora ORDER BY name"
INSERT_CORPUS = f"""
INSERT INTO vectord_corpora (name, dim, metric, language, model, keyword_index)
VALUES (%(name)s, %(dim)s, %(metric)s, %(language)s, %(model)s, %(keyword_index)s)
RETURNING {CORPUS_COLUMNS}"""
DELETE_CORPUS = "DELETE FROM vectord_corpora WHERE id = %(id)s"
# KEY SHARE: a concurrent delete waits for this upsert, a concurrent label update does not.
LOCK_CORPUS = "SELECT model FROM vectord_corpora WHERE id = %(id)s FOR KEY SHARE"
LABEL_CORPUS = """
UPDATE vectord_corpora SET model = %(model)s WHERE id = %(id)s AND model IS NULL"""

# A batch is COPYed into a temporary table, then written by one INSERT ... SELECT: the
# items table's statement-level triggers (lexical statistics) fire once per batch, not
# once per row, and the batch costs two round trips whatever its size. DISTINCT ON
# keeps the last of repeated ids (ON CONFLICT may touch a row only once a statement).
UPSERT_STAGE = """
CREATE TEMP TABLE vectord_upsert (
    seq integer, id text, embedding vector, title text, text text, tags text[],
    metadata jsonb, language text, content_hash text) ON COMMIT DROP"""
UPSERT_COPY = """
COPY vectord_upsert (seq, id, embedding, title, text, tags, metadata, language, content_hash)
FROM STDIN (FORMAT BINARY)"""
UPSERT_TYPES = ["integer", "text", "vector", "text", "text", "text[]", "jsonb", "text", "text"]
UPSERT = """
INSERT INTO {table} AS t (id, embedding, title, text, tags, metadata, language, content_hash)
SELECT DISTINCT ON (id) id, embedding, title, text, tags, metadata, language::regconfig,
       content_hash
FROM vectord_upsert ORDER BY id, seq DESC
ON CONFLICT (id) DO UPDATE SET
    embedding = EXCLUDED.embedding, title = EXCLUDED.title, text = EXCLUDED.text,
    tags = EXCLUDED.tags, metadata = EXCLUDED.metadata, language = EXCLUDED.language,
    content_hash = EXCLUDED.content_hash, updated_at = now()
WHERE t.content_hash IS DISTINCT FROM EXCLUDED.content_hash
   OR t.embedding IS DISTINCT FROM EXCLUDED.embedding"""

# One item's lexical vector, as the generated column computes it (to find an oversized one).
LEX_PROBE = """
SELECT length(vectord_lex_v1(%(language)s::regconfig, %(title)s, %(text)s, %(tags)s))"""

ITEM_COLUMNS = "id, title, text, tags, metadata, language::text AS language, updated_at"
GET_ITEM = f"""
SELECT {ITEM_COLUMNS}, embedding, content_hash, created_at FROM {{table}} WHERE id = %(id)s"""
DELETE_ITEMS = "DELETE FROM {table} WHERE id = ANY(%(ids)s)"
# Read on the writer's connection after its commit: at or past the commit record (the
# commit flushed it), so a backup or replica that holds this position holds the write
# (the Lakehouse-LSN header). The flush position, not the insert one: at a WAL page
# boundary the insert position points past the next page's header, which a standby's
# replay position (the end of the last record) never reaches until something else is
# written, so a search carrying it waited out `replica_wait` and went to the primary.
WAL_POSITION = "SELECT pg_current_wal_flush_lsn()::text"
LIST_IDS = """
SELECT id, content_hash, updated_at FROM {table}
WHERE id LIKE %(prefix)s AND id > %(after)s ORDER BY id LIMIT %(limit)s"""

VECTOR_SEARCH = f"""
SELECT {ITEM_COLUMNS}, embedding {{op}} %(q)s AS distance FROM {{table}}
WHERE {{where}} ORDER BY distance LIMIT %(k)s"""
# relaxed_order may return rows slightly out of order: sort them again.
VECTOR_SEARCH_RELAXED = f"""
WITH relaxed AS MATERIALIZED ({VECTOR_SEARCH})
SELECT * FROM relaxed ORDER BY distance"""
SET_SEARCH = """
SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', %s, false)"""
MATCHING_IDS = "SELECT id FROM {table} WHERE id = ANY(%(match_ids)s::text[]) AND {where}"
# The shared index of an embedding space, over some of its corpora (space_index.py).
# A corpus with ids pending (not in the shared graph yet) makes the statement answer one
# marker row instead of scanning: the search reads the corpora's own graphs.
SPACE_PENDING = """EXISTS (SELECT 1 FROM vectord_space_pending
                           WHERE space_id = %(sid)s AND corpus_id = ANY(%(cids)s))"""
SPACE_SEARCH = f"""
SELECT NULL::bigint AS corpus_id, NULL::text AS id, NULL::float8 AS distance
WHERE {SPACE_PENDING}
UNION ALL
(SELECT corpus_id, id, embedding {{op}} %(q)s AS distance FROM {{table}}
 WHERE corpus_id = ANY(%(cids)s) AND NOT {SPACE_PENDING}
 ORDER BY distance LIMIT %(n)s)"""
# Items per corpus as the planner's statistics say (reltuples; -1 before the first
# ANALYZE): the policy choosing a space's shared index over its corpora's own tables.
CORPUS_SIZES = """
SELECT c.id, c.space_id, coalesce(t.reltuples, -1) FROM vectord_corpora c
LEFT JOIN pg_class t ON t.relname = 'vectord_items_' || c.id
WHERE c.space_id IS NOT NULL"""
SIZES_TTL_SECONDS = 10.0
KEYWORD_SEARCH = f"""
SELECT {ITEM_COLUMNS} FROM {{table}}
WHERE {{expr}} LIKE %(pattern)s AND {{where}}
ORDER BY updated_at DESC, id LIMIT %(k)s"""


@dataclass(frozen=True)
class Written:
    """A committed write: how many items it touched, and the WAL position after it."""

    count: int
    lsn: str


async def _wal_position(conn: Conn) -> str:
    cur = await conn.execute(WAL_POSITION)
    row = await cur.fetchone()
    return str(row[0]) if row else ""


@dataclass
class PreparedItem:
    """One validated item, ready to be written."""

    id: str
    embedding: npt.NDArray[np.float32]
    title: str | None
    text: str
    tags: list[str]
    metadata: dict[str, Any]
    language: str
    content_hash: str

    @staticmethod
    def of(it: Item, embedding: npt.NDArray[np.float32], language: str) -> PreparedItem:
        return PreparedItem(
            id=it.id, embedding=embedding, title=it.title, text=it.text, tags=it.tags,
            metadata=it.metadata, language=language,
            # The hash covers what the caller sent (its language as given, not the one
            # resolved here), so a client can tell unchanged content without detecting.
            content_hash=content_hash(it.title, it.text, it.tags, it.metadata, it.language))

    def row(self, seq: int) -> tuple[Any, ...]:
        """The row COPYed into the staging table (UPSERT_TYPES order)."""
        return (seq, self.id, self.embedding, self.title, self.text, self.tags,
                Jsonb(self.metadata), self.language, self.content_hash)


class ReadPool(Protocol):
    """What searches read through: `ResilientPool` or a replica router."""

    def connection(self, timeout: float | None = None) -> AbstractAsyncContextManager[Conn]: ...


class Store:
    """The registry and the items tables, over one pool.

    Every query takes its connection from `pool.connection()`, which turns PostgreSQL
    being down or unreachable into 503 postgres_unavailable (internal/pg/resilient.py).
    """

    def __init__(self, pool: ResilientPool, cfg: VectordConfig, db: schema.DbInfo) -> None:
        self.pool = pool
        # Where searches read: the primary's pool, or a router over read replicas that
        # answers with the same `connection()` (writes and the registry always use `pool`).
        self.reads: ReadPool = pool
        self.replicas: ReplicaRouter | None = None  # set with `reads` when read_dsns
        self.cfg = cfg
        # The in-memory lexical index of this process (lexical_engine "memory").
        self.lex = LexIndex(cfg.lexical_cache_mb * 2**20)
        self.db = db
        self._cache: dict[str, tuple[float, Corpus]] = {}
        # (hnsw.ef_search, hnsw.iterative_scan) last set on each pooled connection.
        self._search_settings: weakref.WeakKeyDictionary[Conn, tuple[str, str]] = (
            weakref.WeakKeyDictionary())
        # Set when a corpus is deleted: wakes the space maintainer (server._maintain_spaces).
        self.spaces_changed = asyncio.Event()
        self._sizes: dict[int, dict[int, float]] = {}
        self._sizes_at = float("-inf")

    async def wal_position(self) -> str:
        """The primary's WAL position now (after every write committed before the call)."""
        async with self.pool.connection() as conn:
            return await _wal_position(conn)

    async def read_search(self, search: Callable[[], Awaitable[T]], min_lsn: int | None = None
                          ) -> T:
        """A search on a read replica when there are some (again on the primary if its
        replica fails under it), else on the primary; min_lsn: a write it must see."""
        if self.replicas is None:
            return await search()
        return await self.replicas.run(search, min_lsn)

    # --- corpora -------------------------------------------------------------

    async def _fetch_corpus(self, conn: Conn, name: str) -> Corpus | None:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(SELECT_CORPUS, {"name": name})
        row = await cur.fetchone()
        if row is None:
            self._cache.pop(name, None)
            return None
        corpus = Corpus(**row)
        self._cache[name] = (time.monotonic(), corpus)
        return corpus

    async def language_counts(self, corpus: Corpus) -> dict[str, int]:
        """Items per language in the corpus (its BM25 statistics table)."""
        stmt = sql.SQL("SELECT language::text, n FROM {} WHERE n > 0").format(
            lexical.stats_table(corpus.id))
        async with self.pool.connection() as conn:
            cur = await conn.execute(stmt)
            return {str(r[0]): int(r[1]) for r in await cur.fetchall()}

    def searching_a_replica(self) -> bool:
        """Whether the search in this context reads a standby."""
        return self.replicas is not None and self.replicas.on_replica()

    def registry_reads(self) -> ReadPool:
        """Where a search reads the registry: the primary, or (while the primary is down,
        e.g. during a failover) the read replica the search is pinned to, so searches go
        on answering from the standbys while a new leader is elected."""
        return self.reads if self.pool.down and self.replicas is not None else self.pool

    async def corpus(self, name: str, *, fresh: bool = False) -> Corpus:
        """The registry row of name (cached briefly), or NotFound."""
        hit = self._cache.get(name)
        if hit is not None and not fresh and time.monotonic() - hit[0] < CORPUS_TTL_SECONDS:
            return hit[1]
        if hit is not None and not fresh and self.searching_a_replica():
            # A search on a standby keeps going when the primary hangs (a frozen HA
            # leader, before Patroni replaces it): the row it had is used past its TTL.
            try:
                async with asyncio.timeout(STALE_REGISTRY_AFTER):
                    async with self.registry_reads().connection() as conn:
                        corpus = await self._fetch_corpus(conn, name)
            except (Unavailable, TimeoutError):
                return hit[1]
        else:
            async with self.registry_reads().connection() as conn:
                corpus = await self._fetch_corpus(conn, name)
        if corpus is None:
            raise NotFound(f"corpus {name!r} not found")
        # Safe to reuse: a corpus dropped or recreated elsewhere shows as UndefinedTable
        # (with_corpus re-reads), and the model check is made under the row lock.
        self._cache[name] = (time.monotonic(), corpus)
        return corpus

    async def with_corpus(self, name: str, fn: Callable[[Corpus], Awaitable[T]]) -> T:
        """Run fn on the corpus; if its registry row moved under it (the table dropped,
        or its dimension switched by a re-embedding), re-read it once."""
        corpus = await self.corpus(name)
        try:
            return await fn(corpus)
        except (psycopg.errors.UndefinedTable, psycopg.errors.DataException) as exc:
            if not registry_moved(exc):
                raise
            self._cache.pop(name, None)
            corpus = await self.corpus(name, fresh=True)
            return await fn(corpus)

    async def create_corpus(self, name: str, dim: int, metric: str, language: str,
                            model: str | None, defer_index: bool) -> Corpus:
        keyword_index = "trgm" if self.db.trgm else "scan"
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            try:
                await cur.execute(INSERT_CORPUS, {
                    "name": name, "dim": dim, "metric": metric, "language": language,
                    "model": model, "keyword_index": keyword_index})
            except psycopg.errors.UniqueViolation:
                raise Conflict(f"name: corpus {name!r} already exists", field="name") from None
            row = await cur.fetchone()
            assert row is not None
            corpus = Corpus(**row)
            for stmt in schema.create_items_sql(corpus.id, dim, keyword_index):
                await conn.execute(stmt)
            if not defer_index:
                await conn.execute(schema.create_hnsw_sql(
                    corpus.id, metric, self.cfg.hnsw_m, self.cfg.hnsw_ef_construction))
            await lexical.install_corpus(conn, schema.items_table(corpus.id), corpus.id)
            for stmt in schema.layout_sql(corpus.id, "lex"):
                await conn.execute(stmt)
            if not defer_index:  # a deferred corpus joins its space when its index is built
                corpus = msgspec.structs.replace(corpus, space_id=await self._attach(conn, corpus))
        self._cache[name] = (time.monotonic(), corpus)
        return corpus

    async def _attach(self, conn: Conn, corpus: Corpus) -> int:
        return await space_index.attach(conn, corpus, self.cfg.hnsw_m,
                                        self.cfg.hnsw_ef_construction)

    async def attach_pending(self) -> int:
        """Attach every corpus with a built index and no space (corpora from before
        spaces; an interrupted attach): one transaction each, so a restart resumes."""
        done = 0
        async with self.pool.connection() as conn:
            pending = await space_index.unattached(conn)
        for cid, name in pending:
            started = time.perf_counter()
            async with self.pool.connection() as conn, conn.transaction():
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(SELECT_CORPUS_ID + " FOR UPDATE", {"id": cid})
                row = await cur.fetchone()
                if row is None or row["space_id"] is not None:
                    continue  # deleted, or attached by another replica meanwhile
                sid = await self._attach(conn, Corpus(**row))
            self._cache.pop(name, None)
            done += 1
            log.info("corpus_attached_to_space", corpus=name, space=sid,
                     seconds=round(time.perf_counter() - started, 3), left=len(pending) - done)
        return done

    async def apply_pending(self) -> int:
        """Move pending ids' vectors into their spaces' shared graphs, a batch per
        transaction, until none is left; how many."""
        return await self._in_batches(space_index.apply_some)

    async def reclaim(self) -> int:
        """Delete what deleted corpora left in their spaces, a batch per transaction."""
        return await self._in_batches(space_index.reclaim_some)

    async def _in_batches(self, step: Callable[[Conn], Awaitable[int | None]]) -> int:
        """step in a transaction of its own until it says nothing is left (None); the sum."""
        total = 0
        while True:
            async with self.pool.connection() as conn, conn.transaction():
                done = await step(conn)
            if done is None:
                return total
            total += done

    async def count(self, conn: Conn, corpus: Corpus) -> int:
        cur = await conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(schema.items_table(corpus.id)))
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def describe(self, name: str) -> dict[str, Any]:
        async def run(corpus: Corpus) -> dict[str, Any]:
            async with self.pool.connection() as conn:
                fresh = await self._fetch_corpus(conn, corpus.name)
                if fresh is None:
                    raise NotFound(f"corpus {name!r} not found")
                out = fresh.public(await self.count(conn, fresh))
            state = await self.reembed_progress(fresh)
            if state is not None:
                out["reembed"] = state
            return out
        return await self.with_corpus(name, run)

    # --- re-embedding (reembed.py runs the job) -------------------------------

    async def corpus_by_id(self, corpus_id: int) -> Corpus | None:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_CORPUS_ID, {"id": corpus_id})
            row = await cur.fetchone()
        return None if row is None else Corpus(**row)

    async def start_reembed(self, corpus: Corpus, model: str, dim: int) -> bool:
        async with self.pool.connection() as conn, conn.transaction():
            return await reembed_store.start(conn, corpus, model, dim)

    async def reembed_progress(self, corpus: Corpus) -> dict[str, Any] | None:
        """The running re-embedding of the corpus: model, dim, done of total, last error."""
        async with self.pool.connection() as conn:
            job = await reembed_store.job(conn, corpus.id)
            if job is None:
                return None
            try:
                total, done = await reembed_store.progress(conn, corpus.id)
            except psycopg.errors.UndefinedColumn:  # switched meanwhile
                return None
        return {"model": job.model, "dim": job.dim, "done": done, "total": total,
                "state": "running", "error": job.error}

    async def reembed_jobs(self) -> list[int]:
        async with self.pool.connection() as conn:
            return await reembed_store.jobs(conn)

    async def reembed_job(self, corpus_id: int) -> reembed_store.Job | None:
        async with self.pool.connection() as conn:
            return await reembed_store.job(conn, corpus_id)

    async def reembed_pending(self, corpus_id: int, n: int) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            return await reembed_store.pending(conn, corpus_id, n)

    async def reembed_fill(self, corpus_id: int, rows: list[dict[str, Any]],
                           vectors: list[list[float]]) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            await reembed_store.fill(conn, corpus_id, rows, vectors)

    async def reembed_fail(self, corpus_id: int, error: str) -> None:
        async with self.pool.connection() as conn:
            await reembed_store.fail(conn, corpus_id, error)

    async def reembed_build_index(self, corpus: Corpus, dim: int) -> None:
        async with self.pool.connection() as conn:
            await reembed_store.build_next_index(conn, corpus, dim, self.cfg.hnsw_m,
                                                 self.cfg.hnsw_ef_construction)

    async def reembed_switch(
            self, corpus: Corpus, model: str, dim: int, most: int,
            embed: Callable[[list[dict[str, Any]]], Awaitable[list[list[float]]]]) -> bool:
        """Under the corpus's write lock (writers wait): embed the last items without a
        new vector (at most `most`, else False: go on filling outside the lock), then
        switch. Writers never outrun a switch this way."""
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_CORPUS_ID + " FOR UPDATE", {"id": corpus.id})
            row = await cur.fetchone()
            if row is None:
                return True  # deleted meanwhile: nothing to switch
            await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                               (lexical.LOCK_CLASS, corpus.id))
            last = await reembed_store.pending(conn, corpus.id, most + 1)
            if len(last) > most:
                return False
            if last:
                await reembed_store.fill(conn, corpus.id, last, await embed(last))
            done = await reembed_store.switch(conn, Corpus(**row), model, dim)
        if done:
            self._cache.pop(corpus.name, None)
            self.lex.forget(corpus.id)
            self.spaces_changed.set()  # the maintainer attaches it to its new space
        return done

    async def list_corpora(self) -> list[dict[str, Any]]:
        out = []
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(LIST_CORPORA)
            for row in await cur.fetchall():
                corpus = Corpus(**row)
                try:
                    n = await self.count(conn, corpus)
                except psycopg.errors.UndefinedTable:
                    continue  # dropped between the two statements
                out.append(corpus.public(n))
        return out

    async def registry(self) -> list[tuple[str, int, str | None]]:
        """Every corpus's (name, dimension, model label), in name order (no counts)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT name, dim, model FROM vectord_corpora ORDER BY name")
            return [(str(r[0]), int(r[1]), None if r[2] is None else str(r[2]))
                    for r in await cur.fetchall()]

    async def corpus_names(self) -> list[str]:
        """Every corpus's name, in name order (no counts: cheap enough for each search)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT name FROM vectord_corpora ORDER BY name")
            return [str(r[0]) for r in await cur.fetchall()]

    async def delete_corpus(self, name: str) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            corpus = await self._fetch_corpus(conn, name)
            if corpus is None:
                raise NotFound(f"corpus {name!r} not found")
            await conn.execute(DELETE_CORPUS, {"id": corpus.id})
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                schema.items_table(corpus.id)))
            await lexical.drop_corpus(conn, corpus.id)
            await space_index.forget(conn, corpus)
            await reembed_store.cancel(conn, corpus.id)
        self._cache.pop(name, None)
        self.spaces_changed.set()  # the background reclaimer deletes its space rows
        self.lex.forget(corpus.id)

    async def build_index(self, name: str) -> dict[str, Any]:
        """Build the corpus's HNSW index if missing (after a deferred bulk load)."""
        corpus = await self.corpus(name, fresh=True)
        started = time.perf_counter()
        async with self.pool.connection() as conn:
            # Session settings: reset before the connection goes back to the pool.
            await conn.execute("SET maintenance_work_mem = '1GB'")
            await conn.execute("SET max_parallel_maintenance_workers = 2")
            try:
                await conn.execute(schema.create_hnsw_sql(
                    corpus.id, corpus.metric, self.cfg.hnsw_m, self.cfg.hnsw_ef_construction))
                if corpus.space_id is None:
                    async with conn.transaction():
                        await self._attach(conn, corpus)
            finally:
                await conn.execute("RESET maintenance_work_mem")
                await conn.execute("RESET max_parallel_maintenance_workers")
        self._cache.pop(name, None)
        return {"corpus": name, "index": "hnsw", "seconds": round(time.perf_counter() - started, 3)}

    # --- items ---------------------------------------------------------------

    async def upsert(self, corpus: Corpus, items: list[PreparedItem], model: str | None
                     ) -> Written:
        """Write the whole batch in one transaction, or nothing."""
        try:
            return await self._upsert(corpus, items, model)
        except psycopg.errors.ProgramLimitExceeded as exc:  # rolled back: nothing written
            raise await self._over_limit(items, exc) from None

    async def _upsert(self, corpus: Corpus, items: list[PreparedItem], model: str | None
                      ) -> Written:
        async with self.pool.connection() as conn:
            async with conn.transaction():
                await self._upsert_in(conn, corpus, items, model)
            lsn = await _wal_position(conn)
        self.spaces_changed.set()  # the applier takes the new vectors into the shared graph
        if model is not None and corpus.model is None:
            self._cache.pop(corpus.name, None)
        return Written(len(items), lsn)

    async def _upsert_in(self, conn: Conn, corpus: Corpus, items: list[PreparedItem],
                         model: str | None) -> None:
        cur = await conn.execute(LOCK_CORPUS, {"id": corpus.id})
        row = await cur.fetchone()
        if row is None:
            raise psycopg.errors.UndefinedTable("corpus dropped")  # with_corpus re-reads
        stored = row[0]
        if model is not None and stored is None:
            await conn.execute(LABEL_CORPUS, {"id": corpus.id, "model": model})
            cur = await conn.execute(LOCK_CORPUS, {"id": corpus.id})
            row = await cur.fetchone()
            stored = row[0] if row else None
            await self._move_space(conn, corpus.id)
        if model is not None and stored != model:
            raise Conflict(
                f"model: corpus {corpus.name!r} holds vectors of model {stored!r}, "
                f"not {model!r}", field="model", code="model_mismatch")
        await conn.execute(UPSERT_STAGE)
        async with conn.cursor() as wcur:
            async with wcur.copy(UPSERT_COPY) as copy:
                copy.set_types(UPSERT_TYPES)
                for seq, it in enumerate(items):
                    await copy.write_row(it.row(seq))
            await wcur.execute(sql.SQL(UPSERT).format(table=schema.items_table(corpus.id)))

    async def _move_space(self, conn: Conn, corpus_id: int) -> None:
        """A corpus given its model label changes space: out of the old, into the new."""
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(SELECT_CORPUS_ID, {"id": corpus_id})
        row = await cur.fetchone()
        if row is None or row["space_id"] is None:
            return
        corpus = Corpus(**row)
        await space_index.detach(conn, corpus)
        await self._attach(conn, msgspec.structs.replace(corpus, space_id=None))

    async def _over_limit(self, items: list[PreparedItem],
                          exc: psycopg.errors.ProgramLimitExceeded) -> InvalidArgument:
        """A 400 naming the item whose text-search vector is over PostgreSQL's 1 MB.

        Only runs after the batch failed: each item's tsvector is computed alone, largest
        first, until one fails (measured in DECISIONS.md).
        """
        order = sorted(range(len(items)), key=lambda i: -_text_size(items[i]))
        async with self.pool.connection() as conn:
            for i in order:
                it = items[i]
                try:
                    async with conn.transaction():
                        await conn.execute(LEX_PROBE, {"language": it.language, "title": it.title,
                                                       "text": it.text, "tags": it.tags})
                except psycopg.errors.ProgramLimitExceeded:
                    parts = {"text": len(it.text), "title": len(it.title or ""),
                             "tags": sum(len(t) for t in it.tags)}
                    field = f"items[{i}].{max(parts, key=lambda k: parts[k])}"
                    return InvalidArgument(
                        f"{field}: too many distinct words to index (PostgreSQL limits an "
                        "item's text-search vector to 1 MB); split the text", field=field)
        diag = exc.diag.message_primary or "a size limit"
        return InvalidArgument(f"items: an item exceeds PostgreSQL's {diag}", field="items")

    async def get_item(self, corpus: Corpus, item_id: str) -> dict[str, Any]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql.SQL(GET_ITEM).format(table=schema.items_table(corpus.id)),
                              {"id": item_id})
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"item {item_id!r} not found in corpus {corpus.name!r}")
        row["vector"] = [float(x) for x in row.pop("embedding").to_numpy()]
        row["corpus"] = corpus.name
        return row

    async def delete_items(self, corpus: Corpus, ids: list[str]) -> Written:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                sql.SQL(DELETE_ITEMS).format(table=schema.items_table(corpus.id)), {"ids": ids})
            done = Written(cur.rowcount, await _wal_position(conn))
        self.spaces_changed.set()
        return done

    async def list_ids(self, corpus: Corpus, prefix: str, after: str, limit: int
                       ) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql.SQL(LIST_IDS).format(table=schema.items_table(corpus.id)),
                              {"prefix": like_prefix(prefix), "after": after, "limit": limit})
            return await cur.fetchall()

    # --- search --------------------------------------------------------------

    async def vector_search(self, corpus: Corpus, query: npt.NDArray[np.float32], k: int,
                            ef_search: int, where: sql.Composable, params: dict[str, Any]
                            ) -> list[dict[str, Any]]:
        filtered = is_filtered(where)
        stmt = vector_search_sql(corpus, where) if filtered else _unfiltered_vector_sql(
            corpus.id, corpus.metric)
        # hnsw returns at most ef_search rows, so it must be at least k.
        async with self.reads.connection() as conn:
            await self.search_settings(conn, max(ef_search, k), filtered)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, {**params, "q": query, "k": k})
            return await cur.fetchall()

    async def space_search(self, space_id: int, metric: str, corpus_ids: list[int],
                           query: npt.NDArray[np.float32], n: int, ef_search: int
                           ) -> list[tuple[int, str, float]] | None:
        """The n nearest of the named corpora in their space's shared index, nearest
        first: (corpus id, item id, distance). One HNSW scan whatever their number.
        None: one of them has changes the shared index has not taken yet."""
        async with self.reads.connection() as conn:
            await self.search_settings(conn, max(ef_search, n), True)
            cur = await conn.execute(_space_search_sql(space_id, metric),
                                     {"q": query, "cids": corpus_ids, "n": n, "sid": space_id})
            raw = await cur.fetchall()
        if any(r[1] is None for r in raw):
            return None
        rows = [(int(r[0]), str(r[1]), float(r[2])) for r in raw]
        rows.sort(key=lambda r: (r[2], r[1], r[0]))  # relaxed_order: sort again
        return rows

    async def space_sizes(self) -> dict[int, dict[int, float]]:
        """space id -> corpus id -> items as PostgreSQL estimates them (-1: not known
        yet), for the corpora attached to a space; cached briefly."""
        now = time.monotonic()
        if now - self._sizes_at < SIZES_TTL_SECONDS:
            return self._sizes
        sizes: dict[int, dict[int, float]] = {}
        try:
            async with asyncio.timeout(STALE_REGISTRY_AFTER if self._sizes and
                                       self.searching_a_replica() else None):
                async with self.registry_reads().connection() as conn:
                    cur = await conn.execute(CORPUS_SIZES)
                    for cid, sid, n in await cur.fetchall():
                        sizes.setdefault(int(sid), {})[int(cid)] = float(n)
        except (Unavailable, TimeoutError):
            if not self._sizes or not self.searching_a_replica():
                raise
            return self._sizes  # estimates: a stale copy serves while the primary hangs
        self._sizes, self._sizes_at = sizes, now
        return sizes

    async def search_settings(self, conn: Conn, ef_search: int, filtered: bool) -> None:
        """Set hnsw.ef_search / hnsw.iterative_scan on a pooled connection for one search.

        Session-level settings, sent only when this connection's differ: most searches are
        then one statement and one round trip. (psycopg's async pipeline mode, the other
        way to save the round trip, burns ~3 ms of CPU.) Every search that reads the HNSW
        index must come through here, or the cache would vouch for stale settings.
        """
        want = (str(ef_search), "relaxed_order" if filtered else "off")
        if self._search_settings.get(conn) != want:
            self._search_settings.pop(conn, None)
            await conn.execute(SET_SEARCH, want)
            self._search_settings[conn] = want

    async def matching_ids(self, corpus: Corpus, ids: list[str], where: sql.Composable,
                           params: dict[str, Any]) -> set[str]:
        """Which of these items meet the filter (the in-memory BM25's filtered search)."""
        stmt = sql.SQL(MATCHING_IDS).format(table=schema.items_table(corpus.id), where=where)
        async with self.reads.connection() as conn:
            cur = await conn.execute(stmt, {**params, "match_ids": ids})
            return {str(r[0]) for r in await cur.fetchall()}

    async def keyword_search(self, corpus: Corpus, text: str, k: int, where: sql.Composable,
                             params: dict[str, Any]) -> list[dict[str, Any]]:
        stmt = sql.SQL(KEYWORD_SEARCH).format(
            table=schema.items_table(corpus.id), expr=schema.KEYWORD_EXPR, where=where)
        pattern = "%" + escape_like(text.lower()) + "%"
        async with self.reads.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, {**params, "pattern": pattern, "k": k})
            return await cur.fetchall()

    async def ping(self) -> dict[str, Any]:
        async with self.pool.connection(timeout=5.0) as conn:
            cur = await conn.execute("SELECT current_setting('server_version')")
            row = await cur.fetchone()
        return {"status": "ok", "server_version": row[0] if row else "?",
                "vector": self.db.vector_version,
                "keyword_index": "trgm" if self.db.trgm else "scan",
                "schema_version": self.db.version}


def registry_moved(exc: Exception) -> bool:
    """An error meaning the registry row a statement was built from is stale: its table
    dropped (and perhaps recreated), or its vector dimension changed (a re-embedding
    switched); re-reading the row answers properly (a 404, a 400 naming the vector)."""
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return True
    return isinstance(exc, psycopg.errors.DataException) and "dimensions" in str(exc)


@functools.lru_cache(maxsize=1024)
def _space_search_sql(space_id: int, metric: str) -> bytes:
    return sql.SQL(SPACE_SEARCH).format(
        op=sql.SQL(schema.OPERATOR[metric]),
        table=space_index.space_table(space_id)).as_bytes(None)


def _text_size(it: PreparedItem) -> int:
    return len(it.text) + len(it.title or "") + sum(len(t) for t in it.tags)


@functools.lru_cache(maxsize=4096)
def _unfiltered_vector_sql(corpus_id: int, metric: str) -> bytes:
    """The unfiltered vector query of a corpus, rendered once (composing costs ~50 us)."""
    return sql.SQL(VECTOR_SEARCH).format(
        op=sql.SQL(schema.OPERATOR[metric]), table=schema.items_table(corpus_id),
        where=TRUE).as_bytes(None)


def vector_search_sql(corpus: Corpus, where: sql.Composable) -> sql.Composed:
    """The vector branch's query; a filtered one reads the HNSW index iteratively."""
    template = VECTOR_SEARCH_RELAXED if is_filtered(where) else VECTOR_SEARCH
    return sql.SQL(template).format(
        op=sql.SQL(schema.OPERATOR[corpus.metric]), table=schema.items_table(corpus.id),
        where=where)
