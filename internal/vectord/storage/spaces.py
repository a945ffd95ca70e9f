"""`Store`'s shared-index upkeep: attaching corpora to their embedding space's shared
index, applying pending vectors, reclaiming deleted corpora's rows (storage/space_index.py)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import structlog
from psycopg.rows import dict_row

from internal.api.vectord import Corpus
from internal.vectord.storage import space_index
from internal.vectord.storage.parts import SELECT_CORPUS_ID, Conn, StoreParts

log = structlog.get_logger()


class SharedIndexPart(StoreParts):
    """The shared index of each embedding space, kept in step with its corpora."""

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
            async with self.write_connection() as conn, conn.transaction():
                done = await step(conn)
            if done is None:
                return total
            total += done
