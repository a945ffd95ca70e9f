"""`Store`'s side of a conversion to another precision (storage/convert.py runs the job,
convert_sql.py holds its statements): a connection a step, the switch under the corpus's
locks."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from internal.api.responses import Conversion
from internal.api.vectord import Corpus
from internal.pg import memory
from internal.vectord.storage import convert_sql, memory_plan, reembed_sql
from internal.vectord.storage.parts import SELECT_CORPUS_ID, StoreParts

SET_BUILD_MEMORY = "SELECT set_config('maintenance_work_mem', %s, false)"


class ConvertPart(StoreParts):
    """A corpus's conversion job: start, progress, copy, index, switch."""

    async def start_convert(self, corpus: Corpus, precision: str) -> bool:
        async with self.pool.connection() as conn, conn.transaction():
            return await convert_sql.start(conn, corpus, precision)

    async def convert_progress(self, corpus: Corpus) -> Conversion | None:
        """The running conversion of the corpus: the precision, copied of total, last error."""
        async with self.pool.connection() as conn:
            job = await reembed_sql.job(conn, corpus.id)
            if job is None or job.kind != "convert" or job.precision is None:
                return None
            try:
                done, total = await convert_sql.progress(conn, corpus.id)
            except psycopg.errors.UndefinedTable:  # switched meanwhile
                return None
        return Conversion(precision=job.precision,  # type: ignore[arg-type]  # checked by the table
                          done=min(done, total), total=total,
                          state="indexing" if done >= total else "copying", error=job.error)

    async def convert_copy(self, corpus_id: int, after: str, n: int) -> tuple[int, str]:
        """One batch copied (rows read, the last id): a write connection, under the lock."""
        async with self.write_connection() as conn, conn.transaction():
            return await convert_sql.copy(conn, corpus_id, after, n)

    async def convert_build(self, corpus: Corpus, precision: str) -> None:
        """The new table's indexes, concurrently (writes go on), then its statistics."""
        async with self.pool.connection() as conn:
            settings = self.index_settings(corpus)
            stmts = await convert_sql.index_statements(
                conn, corpus, precision, settings.m, settings.ef_construction)
            done, _ = await convert_sql.progress(conn, corpus.id)
            plan = memory_plan.build_memory(done, corpus.dim, precision, settings.m,
                                            memory.machine()[1])
            await conn.execute(SET_BUILD_MEMORY, (memory_plan.setting(plan),))
            await conn.execute("SET max_parallel_maintenance_workers = 2")
            try:
                for stmt in stmts:
                    await conn.execute(stmt)
                await conn.execute(f"ANALYZE {convert_sql.next_name(corpus.id)}")
            finally:
                await conn.execute("RESET maintenance_work_mem")
                await conn.execute("RESET max_parallel_maintenance_workers")

    async def convert_switch(self, corpus: Corpus, precision: str) -> bool:
        """The switch in one transaction (convert_sql.switch); False: not now (an index not
        built, the old table busy past the lock timeout): the job tries again."""
        async with self.pool.connection() as conn:
            try:  # inside the pooled connection: its 503 is for the server's errors
                async with conn.transaction():
                    cur = conn.cursor(row_factory=dict_row)
                    await cur.execute(SELECT_CORPUS_ID + " FOR UPDATE", {"id": corpus.id})
                    row = await cur.fetchone()
                    if row is None:
                        return True  # deleted meanwhile: nothing to switch
                    done = await convert_sql.switch(conn, Corpus(**row), precision)
            except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
                return False  # the other side went on; the job tries again
        if done:
            self._cache.pop(corpus.name, None)
            self.spaces_changed.set()  # the maintainer attaches it to its new space
        return done
