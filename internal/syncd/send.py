"""A sync run's writes: its pages sent as documents, in tasks of `batch` pages (the service
chunks and embeds them), the pages whose files are gone deleted, and each task followed
to its end, its progress told as it goes.

A task the service is still waiting on (embedd down) says so in its `error`; the run waits
for it up to PATIENCE seconds, then fails saying why (503: the ticker tries again soon,
and the task itself goes on in the service). A write the service refuses (a corpus of a
model embedd does not serve, a key that may not write) fails the whole run too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import aiohttp

from internal.common.errors import LakehouseError, Unavailable
from internal.common.packing import packed
from lakehouse.wire.documents import AddDocuments, DocumentIn, Task

POLL = 0.25  # seconds between two looks at the tasks a run waits for
PATIENCE = 30.0  # how long a run waits for a task held up by the stack before it stops
MAX_TASK_BYTES = 8 * 2**20  # a task's pages in text: far below the gateway's body limit

Progress = Callable[[int, int], None]  # (chunks embedded so far, chunks to embed)

# Answers that say "not now" rather than "not this": the stack's trouble of the moment.
_TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """Whether another try in a few seconds may succeed where this one failed."""
    if isinstance(exc, LakehouseError):
        return exc.status in _TRANSIENT_STATUSES
    return isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError))


class TaskStore(Protocol):
    """The document routes a run writes through (vectord's, or the gateway's)."""

    async def add_documents(self, name: str, req: AddDocuments) -> Task: ...

    async def delete_documents(self, name: str, ids: list[str]) -> Task: ...

    async def task(self, task_id: int) -> Task: ...


class Sender:
    """Sends one run's pages and deletes, waits for their tasks and counts what they did;
    `run` answers the pages that failed, with why."""

    def __init__(self, store: TaskStore, corpus: str, progress: Progress | None,
                 todo: int) -> None:
        self.store = store
        self.corpus = corpus
        self.progress = progress
        self.todo = todo
        self.failed: dict[str, str] = {}
        self.embedded = 0
        self.embed_calls = 0
        self.embed_seconds = 0.0

    async def run(self, docs: Sequence[DocumentIn], chunk_chars: int, batch: int,
                  deleted: Sequence[str]) -> dict[str, str]:
        """The tasks sent and followed; a write the service refuses or cannot take fails
        the run (raised; the tasks it took go on in the service)."""
        if self.progress:
            self.progress(0, self.todo)
        tasks: list[tuple[Task, list[str]]] = []
        for part in _parts(docs, batch):
            req = AddDocuments(documents=list(part), chunk_chars=chunk_chars)
            tasks.append((await self.store.add_documents(self.corpus, req),
                          [d.id for d in part]))
        if deleted:
            tasks.append((await self.store.delete_documents(self.corpus, list(deleted)),
                          list(deleted)))
        await self._follow(tasks)
        return self.failed

    async def _follow(self, tasks: list[tuple[Task, list[str]]]) -> None:
        """Each task to its end; a task held up by the stack for PATIENCE seconds (or the
        service not answering) ends the run: Unavailable saying why (the tasks go on)."""
        now = {t.id: t for t, _ in tasks}
        held_since: float | None = None
        while True:
            for task_id, t in list(now.items()):
                if not t.done:
                    now[task_id] = await self.store.task(task_id)
            self._tell(now.values())
            if all(t.done for t in now.values()):
                break
            held = [t for t in now.values() if not t.done and t.error]
            if not held:
                held_since = None
            elif held_since is None:
                held_since = time.monotonic()
            elif time.monotonic() - held_since > PATIENCE:
                raise Unavailable(f"task {held[0].id} of the service waits: {held[0].error} "
                                  "(it goes on; the next run sees what it wrote)",
                                  code="task_waiting")
            await asyncio.sleep(POLL)
        for task, ids in tasks:
            self._ended(now[task.id], ids)

    def _tell(self, tasks: Iterable[Task]) -> None:
        seen = list(tasks)
        self.embedded = sum(t.counts.embedded for t in seen)
        self.embed_calls = sum(t.counts.embed_calls for t in seen)
        self.embed_seconds = sum(t.timings.embed_ms for t in seen) / 1000
        if self.progress:
            self.progress(min(self.embedded, self.todo), self.todo)

    def _ended(self, task: Task, ids: list[str]) -> None:
        for err in task.errors:
            self.failed.setdefault(err.document_id, f"{err.code}: {err.message}")
        if task.state == "failed" and task.error:
            for i in ids:
                self.failed.setdefault(i, f"task {task.id}: {task.error}")


def _parts(docs: Sequence[DocumentIn], batch: int) -> list[list[DocumentIn]]:
    """At most `batch` pages a task, and at most MAX_TASK_BYTES of their text."""
    return packed(docs, lambda doc: len(doc.text.encode("utf-8")), MAX_TASK_BYTES, batch)
