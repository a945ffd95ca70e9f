"""vectord's data access: the corpus registry and each corpus's items table.

`Store` is one object over one pool, assembled from parts a module each: the registry
and the corpora here; items (storage/items.py), search statements (storage/searches.py),
re-embedding (storage/reembedding.py), conversion to another precision
(storage/converting.py) and the shared index of each space (storage/spaces.py), over the
state they share (storage/parts.py)."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import psycopg
import structlog
from psycopg import sql
from psycopg.rows import dict_row

from internal.api import responses as wire
from internal.api.responses import IndexSettings
from internal.api.vectord import Corpus
from internal.common import access
from internal.common.auth import caller
from internal.common.errors import Conflict, NotFound, Unavailable
from internal.config import VectordConfig
from internal.pg import memory
from internal.pg.backend_nice import BackendNice
from internal.pg.replicas import ReplicaRouter
from internal.pg.resilient import ResilientPool
from internal.vectord import tables
from internal.vectord.lexical import facet_values, sql_index
from internal.vectord.lexical.memory_index import LexIndex
from internal.vectord.storage import convert_sql, memory_plan, reembed_sql, schema, space_index
from internal.vectord.storage.converting import ConvertPart
from internal.vectord.storage.items import ItemsPart, wal_position_on
from internal.vectord.storage.items import PreparedItem as PreparedItem
from internal.vectord.storage.items import Written as Written
from internal.vectord.storage.parts import CORPUS_COLUMNS as CORPUS_COLUMNS
from internal.vectord.storage.parts import (
    LIST_CORPORA,
    SELECT_CORPUS,
    STALE_REGISTRY_AFTER,
    Conn,
    LanedReads,
)
from internal.vectord.storage.parts import ReadPool as ReadPool
from internal.vectord.storage.profiles import Profiles
from internal.vectord.storage.reembedding import ReembedPart
from internal.vectord.storage.reindex import ReindexPart
from internal.vectord.storage.searches import SET_SEARCH as SET_SEARCH
from internal.vectord.storage.searches import SearchPart
from internal.vectord.storage.searches import vector_search_sql as vector_search_sql

T = TypeVar("T")

log = structlog.get_logger()

# How long a registry row read by this replica is trusted; another replica may have
# set the model label or dropped the corpus meanwhile (a dropped table is noticed at
# once: UndefinedTable makes us re-read the registry and retry).
CORPUS_TTL_SECONDS = 5.0

INSERT_CORPUS = f"""
INSERT INTO vectord_corpora (name, dim, metric, language, model, keyword_index, precision,
                             hnsw_m, hnsw_ef_construction, ef_search, exact_scan_rows,
                             description)
VALUES (%(name)s, %(dim)s, %(metric)s, %(language)s, %(model)s, %(keyword_index)s,
        %(precision)s, %(m)s, %(ef_construction)s, %(ef_search)s, %(exact_scan_rows)s,
        %(description)s)
RETURNING {CORPUS_COLUMNS}"""

UPDATE_DESCRIPTION = f"""
UPDATE vectord_corpora SET description = %(description)s WHERE name = %(name)s
RETURNING {CORPUS_COLUMNS}"""

DELETE_CORPUS = "DELETE FROM vectord_corpora WHERE id = %(id)s"
# Session-wide on the build's connection (RESET after it): SET takes no parameters.
SET_BUILD_MEMORY = "SELECT set_config('maintenance_work_mem', %s, false)"
DELETE_ATTEMPTS = 5  # a delete that lost a race with a re-embedding's index build goes again


def _lost_to_index_build(exc: BaseException) -> bool:
    """A delete's failure that a re-embedding's CREATE INDEX CONCURRENTLY causes: PostgreSQL
    chose the delete as a deadlock's victim, or the DROP met the build's last catalog
    update of the table ("tuple concurrently updated", XX000). Nothing of the delete was
    committed either way, so it can go again."""
    cause = exc.__cause__ if isinstance(exc, Unavailable) else exc
    return (isinstance(cause, psycopg.errors.DeadlockDetected)
            or (isinstance(cause, psycopg.errors.InternalError_)
                and "tuple concurrently updated" in str(cause)))


class Store(ItemsPart, SearchPart, ReembedPart, ConvertPart, ReindexPart):
    """The registry and the items tables, over one pool.

    Every query takes its connection from `pool.connection()`, which turns PostgreSQL
    being down or unreachable into 503 postgres_unavailable (internal/pg/resilient.py).
    """

    def __init__(self, pool: ResilientPool, cfg: VectordConfig, db: schema.DbInfo) -> None:
        self.pool = pool
        # Where searches read: the primary's pool, or a router over read replicas that
        # answers with the same `connection()` (writes and the registry always use `pool`).
        self.reads: ReadPool = LanedReads(self)
        self.replicas: ReplicaRouter | None = None  # set with `reads` when read_dsns
        self.cfg = cfg
        # The in-memory lexical index of this process (lexical_engine "memory").
        self.lex = LexIndex(cfg.lexical_cache_mb * 2**20)
        # Facet values by the index's ordinals, per corpus version (shaping/facet_counts.py).
        self.facet_values = facet_values.Cache()
        # Model id -> the languages embedd's listing declares it reads (model_languages.py).
        self.model_languages: dict[str, tuple[str, ...]] = {}
        self.db = db
        self._cache: dict[str, tuple[float, Corpus]] = {}
        # (hnsw.ef_search, hnsw.iterative_scan) last set on each pooled connection.
        self._search_settings: weakref.WeakKeyDictionary[Conn, tuple[str, str]] = (
            weakref.WeakKeyDictionary())
        # Set when a corpus is deleted: wakes the space maintainer (server._maintain_spaces).
        self.spaces_changed = asyncio.Event()
        # What each corpus is about (storage/profiles.py), kept by server._maintain_profiles;
        # set profiles_due to wake it (a description changed).
        self.profiles = Profiles()
        self.profiles_due = asyncio.Event()
        self._sizes: dict[int, dict[int, float]] = {}
        self._sizes_at = float("-inf")
        self.write_slots = cfg.write_connections or max(1, cfg.pool_max // 2)
        self._writes = asyncio.Semaphore(self.write_slots)
        self.write_nice = BackendNice(cfg.write_nice)

    async def wal_position(self) -> str:
        """The primary's WAL position now (after every write committed before the call)."""
        async with self.pool.connection() as conn:
            return await wal_position_on(conn)

    async def read_search(self, search: Callable[[], Awaitable[T]], min_lsn: int | None = None
                          ) -> T:
        """A search on a read replica when there are some (again on the primary if its
        replica fails under it), else on the primary; min_lsn: a write it must see."""
        if self.replicas is None:
            return await search()
        return await self.replicas.run(search, min_lsn)

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
            sql_index.stats_table(corpus.id))
        async with self.pool.connection() as conn:
            cur = await conn.execute(stmt)
            return {str(r[0]): int(r[1]) for r in await cur.fetchall()}

    async def corpus(self, name: str, *, fresh: bool = False) -> Corpus:
        """The registry row of name (cached briefly), or NotFound."""
        scope = caller()
        if scope is not None and not scope.sees(name):
            raise access.not_found(name)  # exactly as a corpus that does not exist
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
                            model: str | None, defer_index: bool, precision: str,
                            index: IndexSettings | None = None,
                            description: str | None = None) -> Corpus:
        """A new corpus, its table and (unless deferred) its graph; index: its vector
        index's settings (None: the defaults, recorded as its own); description: what it
        is about."""
        keyword_index = "trgm" if self.db.trgm else "scan"
        settings = index or self.index_defaults()
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            try:
                await cur.execute(INSERT_CORPUS, {
                    "name": name, "dim": dim, "metric": metric, "language": language,
                    "model": model, "keyword_index": keyword_index, "precision": precision,
                    **msgspec.structs.asdict(settings), "description": description})
            except psycopg.errors.UniqueViolation:
                raise Conflict(f"name: corpus {name!r} already exists", field="name") from None
            row = await cur.fetchone()
            assert row is not None
            corpus = Corpus(**row)
            for stmt in schema.create_items_sql(corpus.id, dim, keyword_index, precision):
                await conn.execute(stmt)
            if not defer_index:
                await conn.execute(schema.create_hnsw_sql(
                    corpus, settings.m, settings.ef_construction))
            await sql_index.install_corpus(conn, tables.items_table(corpus.id), corpus.id)
            for stmt in schema.layout_sql(corpus.id, "lex"):
                await conn.execute(stmt)
            if not defer_index:  # a deferred corpus joins its space when its index is built
                corpus = msgspec.structs.replace(corpus, space_id=await self._attach(conn, corpus))
        self._cache[name] = (time.monotonic(), corpus)
        return corpus

    async def describe_as(self, name: str, description: str | None) -> wire.Corpus:
        """Set (None: clear) what the corpus is about; its profile is rebuilt with it in
        the background (storage/profiles.py)."""
        await self.corpus(name)  # outside the caller's scope: 404, as a missing corpus
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(UPDATE_DESCRIPTION, {"name": name, "description": description})
            row = await cur.fetchone()
            if row is None:
                raise NotFound(f"corpus {name!r} not found")
            corpus = Corpus(**row)
            count = await self.count(conn, corpus)
        self._cache[name] = (time.monotonic(), corpus)
        self.profiles_due.set()
        return corpus.public(count)

    async def count(self, conn: Conn, corpus: Corpus) -> int:
        cur = await conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(tables.items_table(corpus.id)))
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def describe(self, name: str) -> wire.Corpus:
        async def run(corpus: Corpus) -> wire.Corpus:
            async with self.pool.connection() as conn:
                fresh = await self._fetch_corpus(conn, corpus.name)
                if fresh is None:
                    raise NotFound(f"corpus {name!r} not found")
                count = await self.count(conn, fresh)
            return fresh.public(count, await self.reembed_progress(fresh),
                                await self.convert_progress(fresh), self.index_settings(fresh),
                                await self.reindex_progress(fresh))
        return await self.with_corpus(name, run)

    async def list_corpora(self) -> list[wire.Corpus]:
        """Every corpus with its count, and its `reembed` or `conversion` progress while
        one runs."""
        counted: list[tuple[Corpus, int]] = []
        async with self.pool.connection() as conn:
            moving = set(await reembed_sql.jobs(conn))
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(LIST_CORPORA)
            for row in await cur.fetchall():
                corpus = Corpus(**row)
                try:
                    counted.append((corpus, await self.count(conn, corpus)))
                except psycopg.errors.UndefinedTable:
                    continue  # dropped between the two statements
        return [corpus.public(n, await self.reembed_progress(corpus),
                              await self.convert_progress(corpus), self.index_settings(corpus),
                              await self.reindex_progress(corpus)) if corpus.id in moving
                else corpus.public(n, index=self.index_settings(corpus))
                for corpus, n in counted]

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
        # A re-embedding's CREATE INDEX CONCURRENTLY waits for this transaction while the
        # DROP waits for its lock: PostgreSQL breaks the deadlock by failing one side, or
        # the DROP meets the build's last update of the table's catalog row. When that
        # fails the delete, the delete goes again (the index build is then past its wait,
        # and the DROP waits for it to end): the caller's delete never fails for a
        # re-embedding it did not know of.
        for attempt in range(DELETE_ATTEMPTS):
            try:
                corpus = await self._delete_corpus_once(name)
                break
            except (Unavailable, psycopg.errors.InternalError_) as exc:
                # Unavailable: the pool's 503 for any operational error (a deadlock's too).
                if not _lost_to_index_build(exc) or attempt == DELETE_ATTEMPTS - 1:
                    raise
                log.info("corpus_delete_retried", corpus=name, error=str(exc))
                await asyncio.sleep(0.05 * (attempt + 1))
        self._cache.pop(name, None)
        self.spaces_changed.set()  # the background reclaimer deletes its space rows
        self.lex.forget(corpus.id)
        self.facet_values.forget(corpus.id)

    async def _delete_corpus_once(self, name: str) -> Corpus:
        async with self.pool.connection() as conn, conn.transaction():
            corpus = await self._fetch_corpus(conn, name)
            if corpus is None:
                raise NotFound(f"corpus {name!r} not found")
            await conn.execute(DELETE_CORPUS, {"id": corpus.id})
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                tables.items_table(corpus.id)))
            await sql_index.drop_corpus(conn, corpus.id)
            await space_index.forget(conn, corpus)
            await reembed_sql.cancel(conn, corpus.id)
            await convert_sql.drop(conn, corpus.id)
        return corpus

    async def build_index(self, name: str) -> wire.IndexBuilt:
        """Build the corpus's HNSW index if missing (after a deferred bulk load)."""
        corpus = await self.corpus(name, fresh=True)
        started = time.perf_counter()
        async with self.pool.connection() as conn:
            # Session settings: reset before the connection goes back to the pool.
            await conn.execute(SET_BUILD_MEMORY, (await self.build_memory(conn, corpus),))
            await conn.execute("SET max_parallel_maintenance_workers = 2")
            try:
                settings = self.index_settings(corpus)
                await conn.execute(schema.create_hnsw_sql(
                    corpus, settings.m, settings.ef_construction))
                if corpus.space_id is None:
                    async with conn.transaction():
                        await self._attach(conn, corpus)
            finally:
                await conn.execute("RESET maintenance_work_mem")
                await conn.execute("RESET max_parallel_maintenance_workers")
            seconds = time.perf_counter() - started
            # The planner's statistics of a bulk load now, not at autovacuum's next visit:
            # a filtered search's plan reads its estimate (storage/searches.py exact_scan).
            await conn.execute(sql.SQL("ANALYZE {}").format(tables.items_table(corpus.id)))
        self._cache.pop(name, None)
        return wire.IndexBuilt(corpus=name, index="hnsw", seconds=round(seconds, 3))

    async def build_memory(self, conn: Conn, corpus: Corpus) -> str:
        """maintenance_work_mem for building the corpus's graph now (memory_plan)."""
        return memory_plan.setting(memory_plan.build_memory(
            await self.count(conn, corpus), corpus.dim, corpus.precision,
            self.index_settings(corpus).m, memory.machine()[1]))

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
