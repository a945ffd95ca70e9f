"""The task runner of one vectord: it takes the oldest unfinished task of each corpus, one
task at a time, under a session lock per corpus (several vectords share the tasks: one
runs a corpus's tasks, in their order), and runs it (documents/writer.py).

A task that the stack fails (embedd down, PostgreSQL gone) stays `processing` with the
trouble in its `error` and is tried again after a back-off, resuming after the documents
it had done; a vectord that dies mid-task leaves it `processing`, and the next runner to
look takes it on. Nothing acknowledged is lost: the request is in the task's row until
the task is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import msgspec
import psycopg
import structlog
from aiohttp import web

from internal.clients.embed import EmbedClient
from internal.common import waits
from internal.common.errors import LakehouseError, describe
from internal.vectord.documents.writer import Progress, StackTrouble, TaskFailed, Writer
from internal.vectord.judging import Judge
from internal.vectord.storage.store import Store
from internal.vectord.storage.tasks import Claimed
from lakehouse.wire.documents import AddDocuments, DeleteDocuments, Task

log = structlog.get_logger()

# Session advisory lock class: the vectord running a corpus's tasks holds (class, corpus id).
TASK_LOCK_CLASS = 0x7A5C
POLL_SECONDS = 1.0  # tasks enqueued through another vectord are looked for this often
RETRY_FIRST, RETRY_CAP = 1.0, 30.0  # a task the stack failed goes again after 1, 2, 4 … s
DELETE_BATCH = 500  # documents a delete removes per transaction
UNKNOWN_TRIES = 5  # runs a task may fail for an unexpected reason before it is failed


class Runner:
    """Runs the tasks, and tells the requests waiting for one when it ends."""

    def __init__(self, store: Store, embed: EmbedClient | None, judge: Judge) -> None:
        self.store = store
        self.embed = embed
        self.judge = judge
        self.wake = asyncio.Event()
        self.ended = asyncio.Event()  # set (and replaced) whenever a task ends here
        self.retry_at: dict[int, float] = {}
        self.failures: dict[int, int] = {}

    async def run_forever(self) -> None:
        while True:
            try:
                ran = await self._once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reported; the next round goes on
                log.warning("tasks_scan_failed", error=str(exc))
                ran = False
            if not ran:
                await waits.event(self.wake, self._idle())
                self.wake.clear()

    def _idle(self) -> float:
        """Until the next look: a poll, or sooner when a task waits out a back-off."""
        now = time.monotonic()
        due = [at - now for at in self.retry_at.values()]
        return max(0.05, min([POLL_SECONDS, *due]))

    async def _once(self) -> bool:
        """Run the first task that is due and whose corpus no other runner holds."""
        now = time.monotonic()
        for task_id, corpus_id in await self.store.task_heads():
            if self.retry_at.get(task_id, 0.0) > now:
                continue
            async with self.store.pool.connection() as lock:
                cur = await lock.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                         (TASK_LOCK_CLASS, corpus_id))
                row = await cur.fetchone()
                if not (row and row[0]):
                    continue  # another vectord runs this corpus's tasks
                try:
                    await self._run(task_id)
                finally:
                    with contextlib.suppress(psycopg.Error):
                        await lock.execute("SELECT pg_advisory_unlock(%s, %s)",
                                           (TASK_LOCK_CLASS, corpus_id))
            return True
        return False

    async def _run(self, task_id: int) -> None:
        claimed = await self.store.claim(task_id)
        if claimed is None:
            return
        progress = Progress(claimed.counts, claimed.errors, claimed.timings)
        started = time.perf_counter()
        try:
            await self._do(claimed, progress)
        except StackTrouble as exc:
            self._later(claimed, progress, str(exc))
            await self._progress(claimed, progress, str(exc))
            return
        except TaskFailed as exc:
            await self._end(claimed, progress, "failed", str(exc), started)
            return
        except (LakehouseError, psycopg.OperationalError) as exc:  # PostgreSQL gone
            self._later(claimed, progress, describe(exc))
            return
        except Exception as exc:
            log.exception("task_crashed", task=task_id)
            tries = self.failures[task_id] = self.failures.get(task_id, 0) + 1
            if tries < UNKNOWN_TRIES:
                self._later(claimed, progress, "internal error")
                return
            await self._end(claimed, progress, "failed", f"internal error: {exc}", started)
            return
        state = "failed" if progress.counts.failed else "succeeded"
        await self._end(claimed, progress, state, None, started)

    async def _do(self, claimed: Claimed, progress: Progress) -> None:
        corpus = await self.store.corpus_by_id(claimed.corpus_id)
        if corpus is None or corpus.name != claimed.corpus:
            raise TaskFailed(f"corpus {claimed.corpus!r} was deleted")
        if claimed.kind == "documents_delete":
            ids = msgspec.json.decode(claimed.payload, type=DeleteDocuments).ids
            for start in range(claimed.position, len(ids), DELETE_BATCH):
                part = ids[start:start + DELETE_BATCH]
                found, removed, _ = await self.store.delete_documents(corpus, part)
                progress.counts.deleted += len(found)
                progress.counts.not_found += len(part) - len(found)
                progress.counts.stale += removed
                await self._progress(claimed, progress, None, start + len(part))
            return
        if self.embed is None:
            raise TaskFailed("documents need embedd ([vectord] embedd_url is empty)")
        req = msgspec.json.decode(claimed.payload, type=AddDocuments)

        async def report(p: Progress, position: int) -> None:
            await self._progress(claimed, p, None, position)

        writer = Writer(self.store, self.embed, self.judge, corpus, report)
        await writer.add(req, progress, claimed.position)

    def _later(self, claimed: Claimed, progress: Progress, why: str) -> None:
        """Try the task again after a back-off (1, 2, 4 … s, at most RETRY_CAP)."""
        tries = self.failures[claimed.id] = self.failures.get(claimed.id, 0) + 1
        delay = min(RETRY_CAP, RETRY_FIRST * 2 ** (tries - 1))
        self.retry_at[claimed.id] = time.monotonic() + delay
        log.warning("task_waits", task=claimed.id, corpus=claimed.corpus, error=why,
                    retry_in=delay)

    async def _progress(self, claimed: Claimed, progress: Progress, error: str | None,
                        position: int | None = None) -> None:
        with contextlib.suppress(LakehouseError, psycopg.Error):
            await self.store.task_progress(
                claimed.id, claimed.position if position is None else position,
                progress.counts, progress.errors, error, progress.timings)

    async def _end(self, claimed: Claimed, progress: Progress, state: str, error: str | None,
                   started: float) -> None:
        progress.timings.total_ms += (time.perf_counter() - started) * 1000
        for name in ("chunk_ms", "embed_ms", "write_ms", "total_ms"):
            setattr(progress.timings, name, round(getattr(progress.timings, name), 3))
        await self.store.task_finish(claimed.id, state, progress.counts, progress.errors,
                                     error, progress.timings)
        self.retry_at.pop(claimed.id, None)
        self.failures.pop(claimed.id, None)
        log.info("task_done", task=claimed.id, corpus=claimed.corpus, kind=claimed.kind,
                 state=state, **msgspec.structs.asdict(progress.counts))
        ended, self.ended = self.ended, asyncio.Event()
        ended.set()

    async def wait(self, task: Task, seconds: float) -> Task:
        """The task once it ended, or as it is after `seconds`."""
        deadline = time.monotonic() + seconds
        while not task.done and (left := deadline - time.monotonic()) > 0:
            await waits.event(self.ended, min(left, 0.25))
            task = await self.store.task(task.id) or task
        return task


RUNNER: web.AppKey[Runner] = web.AppKey("runner", Runner)
