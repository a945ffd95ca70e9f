"""`Store`'s side of re-embedding (storage/reembed.py runs the job, reembed_sql.py holds its
statements): a connection a step, the switch under the corpus's write lock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row

from internal.api.responses import Reembedding
from internal.api.vectord import Corpus
from internal.vectord.lexical import sql_index
from internal.vectord.storage import reembed_sql
from internal.vectord.storage.parts import SELECT_CORPUS_ID, StoreParts


class ReembedPart(StoreParts):
    """A corpus's re-embedding job: start, progress, fill, fail, index, switch."""

    async def corpus_by_id(self, corpus_id: int) -> Corpus | None:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_CORPUS_ID, {"id": corpus_id})
            row = await cur.fetchone()
        return None if row is None else Corpus(**row)

    async def start_reembed(self, corpus: Corpus, model: str, dim: int) -> bool:
        async with self.pool.connection() as conn, conn.transaction():
            return await reembed_sql.start(conn, corpus, model, dim)

    async def reembed_progress(self, corpus: Corpus) -> Reembedding | None:
        """The running re-embedding of the corpus: model, dim, done of total, last error."""
        async with self.pool.connection() as conn:
            job = await reembed_sql.job(conn, corpus.id)
            if job is None or job.kind != "reembed":
                return None
            try:
                total, done = await reembed_sql.progress(conn, corpus.id)
            except psycopg.errors.UndefinedColumn:  # switched meanwhile
                return None
        return Reembedding(model=job.model, dim=job.dim, done=done, total=total,
                           error=job.error)

    async def reembed_jobs(self) -> list[int]:
        async with self.pool.connection() as conn:
            return await reembed_sql.jobs(conn)

    async def corpora_to_move(self, models: list[str]) -> list[Corpus]:
        """The corpora of these models with no re-embedding under way."""
        async with self.pool.connection() as conn:
            return await reembed_sql.to_move(conn, models)

    async def reembed_job(self, corpus_id: int) -> reembed_sql.Job | None:
        async with self.pool.connection() as conn:
            return await reembed_sql.job(conn, corpus_id)

    async def reembed_pending(self, corpus_id: int, n: int,
                              after: str = "") -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            return await reembed_sql.pending(conn, corpus_id, n, after)

    async def reembed_fill(self, corpus_id: int, rows: list[dict[str, Any]],
                           vectors: list[list[float]]) -> None:
        async with self.write_connection() as conn, conn.transaction():
            await reembed_sql.fill(conn, corpus_id, rows, vectors)

    async def reembed_fail(self, corpus_id: int, error: str) -> None:
        async with self.pool.connection() as conn:
            await reembed_sql.fail(conn, corpus_id, error)

    async def reembed_build_index(self, corpus: Corpus, dim: int) -> None:
        async with self.pool.connection() as conn:
            settings = self.index_settings(corpus)
            await reembed_sql.build_next_index(conn, corpus, dim, settings.m,
                                               settings.ef_construction)

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
                               (sql_index.LOCK_CLASS, corpus.id))
            last = await reembed_sql.pending(conn, corpus.id, most + 1)
            if len(last) > most:
                return False
            if last:
                await reembed_sql.fill(conn, corpus.id, last, await embed(last))
            done = await reembed_sql.switch(conn, Corpus(**row), model, dim)
        if done:
            self._cache.pop(corpus.name, None)
            self.lex.forget(corpus.id)
            self.spaces_changed.set()  # the maintainer attaches it to its new space
        return done
