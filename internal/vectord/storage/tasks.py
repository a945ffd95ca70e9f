"""`Store`'s tasks: the writes of documents, persisted with their documents before they are
acknowledged (202) and run in id order per corpus by a vectord's task runner
(internal.vectord.documents.runner). A task's request stays in its row until it is done,
so a vectord or PostgreSQL restart resumes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from internal.api.vectord import Corpus
from internal.vectord.storage.parts import StoreParts
from lakehouse.wire.documents import Task, TaskCounts, TaskError, TaskTimings

TASK_COLUMNS = ("id, corpus_id, corpus, kind, state, counts, errors, error, enqueued_at, "
                "started_at, finished_at, timings")

ENQUEUE = f"""
INSERT INTO vectord_tasks (corpus_id, corpus, kind, payload, counts, key_id)
VALUES (%(corpus_id)s, %(corpus)s, %(kind)s, %(payload)s, %(counts)s, %(key_id)s)
RETURNING {TASK_COLUMNS}"""

GET = f"SELECT {TASK_COLUMNS} FROM vectord_tasks WHERE id = %(id)s"

# The oldest unfinished task of each corpus: the one its runner takes next.
HEADS = """
SELECT DISTINCT ON (corpus_id) id, corpus_id FROM vectord_tasks
WHERE state IN ('enqueued', 'processing') ORDER BY corpus_id, id"""

CLAIM = """
UPDATE vectord_tasks SET state = 'processing', started_at = coalesce(started_at, now())
WHERE id = %(id)s AND state IN ('enqueued', 'processing')
RETURNING kind, payload, corpus_id, corpus, position, counts, errors, timings,
          extract(epoch FROM (started_at - enqueued_at)) * 1000 AS waited_ms"""

PROGRESS = """
UPDATE vectord_tasks SET counts = %(counts)s, errors = %(errors)s, error = %(error)s,
       timings = %(timings)s, position = %(position)s WHERE id = %(id)s"""

FINISH = """
UPDATE vectord_tasks SET state = %(state)s, counts = %(counts)s, errors = %(errors)s,
       error = %(error)s, timings = %(timings)s, finished_at = now(), payload = NULL
WHERE id = %(id)s"""

# A corpus deleted: its waiting tasks can never run (in the delete's transaction).
ORPHAN = """
UPDATE vectord_tasks SET state = 'failed', error = %(error)s, finished_at = now(), payload = NULL
WHERE corpus_id = %(corpus_id)s AND state IN ('enqueued', 'processing')"""

PENDING_BEFORE = """
SELECT count(*) FROM vectord_tasks
WHERE corpus_id = %(corpus_id)s AND state IN ('enqueued', 'processing') AND id < %(id)s"""

@dataclass(frozen=True)
class Claimed:
    """A task taken to run: what it asks (the request as accepted), its corpus, and what
    an earlier run of it did (a restart resumes after `position` documents)."""

    id: int
    kind: str
    payload: bytes
    corpus_id: int
    corpus: str
    position: int
    counts: TaskCounts
    errors: list[TaskError]
    timings: TaskTimings


def task_of(row: dict[str, Any]) -> Task:
    """A row of vectord_tasks as the wire's Task."""
    return Task(id=row["id"], corpus=row["corpus"], kind=row["kind"], state=row["state"],
                counts=msgspec.convert(row["counts"] or {}, TaskCounts),
                errors=msgspec.convert(row["errors"] or [], list[TaskError]),
                error=row["error"], enqueued_at=row["enqueued_at"],
                started_at=row["started_at"], finished_at=row["finished_at"],
                timings=msgspec.convert(row["timings"] or {}, TaskTimings))


def _json(value: Any) -> Jsonb:
    return Jsonb(msgspec.to_builtins(value))


class TasksPart(StoreParts):
    """Tasks: enqueue (before the 202), read, list, claim, progress, finish."""

    async def enqueue(self, corpus: Corpus, kind: str, payload: bytes, received: int,
                      key_id: str | None) -> Task:
        """The task committed (its request in it) before the caller hears of it."""
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(ENQUEUE, {
                "corpus_id": corpus.id, "corpus": corpus.name, "kind": kind,
                "payload": payload, "counts": _json(TaskCounts(received=received)),
                "key_id": key_id})
            row = await cur.fetchone()
        assert row is not None
        return task_of(row)

    async def task(self, task_id: int) -> Task | None:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(GET, {"id": task_id})
            row = await cur.fetchone()
        return None if row is None else task_of(row)

    async def tasks(self, *, corpora: Sequence[str] | None, states: Sequence[str],
                    kinds: Sequence[str], before: int | None, limit: int) -> list[Task]:
        """Newest first: tasks of these corpora (None: any), states and kinds (empty:
        any), with an id at most `before`."""
        where = ["true"]
        params: dict[str, Any] = {"limit": limit}
        for column, values in (("corpus", corpora), ("state", states), ("kind", kinds)):
            if values is not None and (values or column == "corpus"):
                where.append(f"{column} = ANY(%({column})s)")
                params[column] = list(values)
        if before is not None:
            where.append("id <= %(before)s")
            params["before"] = before
        stmt = (f"SELECT {TASK_COLUMNS} FROM vectord_tasks WHERE {' AND '.join(where)} "
                "ORDER BY id DESC LIMIT %(limit)s")
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, params)  # built from constants and parameters
            return [task_of(r) for r in await cur.fetchall()]

    async def task_heads(self) -> list[tuple[int, int]]:
        """(task id, corpus id) of each corpus's oldest unfinished task, oldest first."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(HEADS)
            return sorted((int(r[0]), int(r[1])) for r in await cur.fetchall())

    async def claim(self, task_id: int) -> Claimed | None:
        """The task marked processing (kept so after a restart), with its request; None
        when it finished meanwhile."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(CLAIM, {"id": task_id})
            row = await cur.fetchone()
        if row is None or row["payload"] is None:
            return None
        timings = msgspec.convert(row["timings"] or {}, TaskTimings)
        timings.waited_ms = round(float(row["waited_ms"] or 0.0), 3)
        return Claimed(task_id, row["kind"], bytes(row["payload"]), row["corpus_id"],
                       row["corpus"], int(row["position"]),
                       msgspec.convert(row["counts"] or {}, TaskCounts),
                       msgspec.convert(row["errors"] or [], list[TaskError]), timings)

    async def task_progress(self, task_id: int, position: int, counts: TaskCounts,
                            errors: list[TaskError], error: str | None,
                            timings: TaskTimings) -> None:
        """What the task did so far, `position` documents of its request done."""
        async with self.pool.connection() as conn:
            await conn.execute(PROGRESS, {"id": task_id, "position": position,
                                          "counts": _json(counts), "errors": _json(errors),
                                          "error": error, "timings": _json(timings)})

    async def task_finish(self, task_id: int, state: str, counts: TaskCounts,
                          errors: list[TaskError], error: str | None,
                          timings: TaskTimings) -> None:
        """Its final state; its request dropped (the counts and errors say what it did)."""
        async with self.pool.connection() as conn:
            await conn.execute(FINISH, {"id": task_id, "state": state, "counts": _json(counts),
                                        "errors": _json(errors), "error": error,
                                        "timings": _json(timings)})

    async def tasks_before(self, corpus_id: int, task_id: int) -> int:
        """Unfinished tasks of the corpus enqueued before this one (they run first)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(PENDING_BEFORE, {"corpus_id": corpus_id, "id": task_id})
            row = await cur.fetchone()
        return int(row[0]) if row else 0
