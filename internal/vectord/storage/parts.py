"""What the parts of vectord's `Store` share: the connection types, the registry's
columns, and the state they read (`StoreParts`)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from psycopg import AsyncConnection

from internal.api.responses import IndexSettings
from internal.api.vectord import Corpus
from internal.common import priority
from internal.config import VectordConfig
from internal.pg.backend_nice import BackendNice
from internal.pg.replicas import ReplicaRouter
from internal.pg.resilient import ResilientPool
from internal.vectord.lexical.memory_index import LexIndex
from internal.vectord.storage import schema

Conn = AsyncConnection[Any]

CORPUS_COLUMNS = ("id, name, dim, metric, language, model, keyword_index, created_at, space_id, "
                  "precision, hnsw_m, hnsw_ef_construction, ef_search, exact_scan_rows, "
                  "description")

SELECT_CORPUS = f"SELECT {CORPUS_COLUMNS} FROM vectord_corpora WHERE name = %(name)s"

SELECT_CORPUS_ID = f"SELECT {CORPUS_COLUMNS} FROM vectord_corpora WHERE id = %(id)s"

LIST_CORPORA = f"SELECT {CORPUS_COLUMNS} FROM vectord_corpora ORDER BY name"

ITEM_COLUMNS = "id, title, text, tags, metadata, language::text AS language, updated_at"

# A search on a standby waits this long for the primary's registry row (or the corpora's
# sizes) before it uses what it has (past its TTL) rather than fail with a hung primary.
STALE_REGISTRY_AFTER = 1.0



class ReadPool(Protocol):
    """What searches read through: `ResilientPool` or a replica router."""

    def connection(self, timeout: float | None = None) -> AbstractAsyncContextManager[Conn]: ...


class StoreParts:
    """The state every part of `Store` reads, set by `Store.__init__` (declared here so
    that each part, a class of its own module, is checked on its own)."""

    pool: ResilientPool
    # Where searches read: the primary's pool, or a router over read replicas that
    # answers with the same `connection()` (writes and the registry always use `pool`).
    reads: ReadPool
    replicas: ReplicaRouter | None
    cfg: VectordConfig
    lex: LexIndex
    db: schema.DbInfo
    # Set when a corpus is deleted or items written: wakes the space maintainer.
    spaces_changed: asyncio.Event
    _cache: dict[str, tuple[float, Corpus]]
    _search_settings: weakref.WeakKeyDictionary[Conn, tuple[str, str]]
    _sizes: dict[int, dict[int, float]]
    _sizes_at: float
    # Bulk writes hold at most write_slots of the pool at once (`write_connection`).
    write_slots: int
    _writes: asyncio.Semaphore
    # The write connections' backends at a lower OS priority (`write_connection`).
    write_nice: BackendNice

    def index_defaults(self) -> IndexSettings:
        """The vector index settings of a corpus that names none ([vectord]'s)."""
        c = self.cfg
        return IndexSettings(m=c.hnsw_m, ef_construction=c.hnsw_ef_construction,
                             ef_search=c.ef_search, exact_scan_rows=c.exact_scan_rows)

    def index_settings(self, corpus: Corpus) -> IndexSettings:
        """The corpus's vector index settings in force."""
        return corpus.settings(self.index_defaults())

    def searching_a_replica(self) -> bool:
        """Whether the search in this context reads a standby."""
        return self.replicas is not None and self.replicas.on_replica()

    def registry_reads(self) -> ReadPool:
        """Where a search reads the registry: the primary, or (while the primary is down,
        e.g. during a failover) the read replica the search is pinned to, so searches go
        on answering from the standbys while a new leader is elected."""
        return self.reads if self.pool.down and self.replicas is not None else self.pool

    @contextlib.asynccontextmanager
    async def write_connection(self) -> AsyncIterator[Conn]:
        """A connection for a bulk write: at most write_slots at once, so searches always
        find the rest of the pool free (writes queue here, not in front of searches); its
        backend at a lower OS priority while it writes (`write_nice`, a local server)."""
        async with self._writes, self.lowered_connection() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def lowered_connection(self, timeout: float | None = None) -> AsyncIterator[Conn]:
        """A pooled connection whose backend runs at `write_nice` while it is held."""
        async with self.pool.connection(timeout) as conn:
            pid = conn.info.backend_pid
            lowered = self.write_nice.lower(conn.info.host, pid)
            try:
                yield conn
            finally:
                if lowered and not self.write_nice.restore(pid):
                    await conn.close()  # never lent to a search at the lower priority


class LanedReads:
    """Where searches read on the primary: its pool, except the service's bulk searches
    (priority BULK: the learned ranker's training), whose backends run at the writes'
    lower OS priority, so the cores go to the searches people wait for first."""

    def __init__(self, parts: StoreParts) -> None:
        self.parts = parts

    def connection(self, timeout: float | None = None) -> AbstractAsyncContextManager[Conn]:
        if priority.bulk():
            return self.parts.lowered_connection(timeout)
        return self.parts.pool.connection(timeout)
