"""Coalesce texts from concurrent requests into small model calls, interactive before bulk.

Two lanes (docs/decisions/0110-embedding-lanes.md): texts of questions go to the interactive
lane, documents to the bulk lane. A worker always takes the interactive lane first, so a
question waits at most for the model calls already running (one bulk slice of
`batch_size` texts each), never behind queued documents. `reserved` more workers serve
the interactive lane only, on threads of their own, and the bulk threads run at a lower
OS priority (`bulk_nice`), so a question's model call gets a core at once even while
every shared worker is busy with documents.

Within a lane, measured on the 2-core target: small batches of similar length are
fastest, so a worker takes the oldest `window` pending texts, sorts them by length, and
runs the batch of `batch_size` that holds the oldest text. The oldest text is always in
the next call of its lane, and a lone text waits at most `max_wait` for company.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from internal.common import priority
from internal.embedd.local import Encoded


class Lane(enum.Enum):
    INTERACTIVE = "interactive"
    BULK = "bulk"


@dataclass
class _Item:
    text: str
    future: asyncio.Future[tuple[Encoded, int, float]]  # (call, row, call start)
    enqueued: float = field(default_factory=time.monotonic)


@dataclass
class LaneStats:
    """What a lane has done since start-up (GET /v1/embed/lanes)."""

    calls: int = 0
    texts: int = 0
    wait_max_s: float = 0.0  # longest any text waited for its model call to start
    wait_total_s: float = 0.0  # every text's wait, summed (mean wait: over texts)
    call_max_s: float = 0.0  # longest model call (for the bulk lane: one slice)

    def started(self, start: float, enqueued: Sequence[float]) -> None:
        """A model call started at `start` for texts that arrived at `enqueued`."""
        self.calls += 1
        self.texts += len(enqueued)
        self.wait_max_s = max(self.wait_max_s, start - min(enqueued))
        self.wait_total_s += sum(start - t for t in enqueued)

    def as_dict(self, pending: int) -> dict[str, object]:
        return {"pending": pending, "calls": self.calls, "texts": self.texts,
                "wait_max_ms": round(self.wait_max_s * 1000, 3),
                "wait_total_ms": round(self.wait_total_s * 1000, 3),
                "call_max_ms": round(self.call_max_s * 1000, 3)}


@dataclass(frozen=True)
class Embedded:
    encoded: Encoded
    wait_s: float  # the longest any of the request's texts waited for its model call


class Coalescer:
    """Runs `run(texts)` (a blocking model call) on batches of texts, lane by lane.

    `executor` runs the shared workers (both lanes, interactive first);
    `reserved_executor` the `reserved` interactive-only workers.
    """

    def __init__(self, run: Callable[[list[str]], Encoded], executor: Executor, *,
                 batch_size: int, max_wait: float, workers: int, window: int = 0,
                 reserved: int = 0, reserved_executor: Executor | None = None) -> None:
        self._run = run
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.window = window or batch_size * 8
        self._pending: dict[Lane, deque[_Item]] = {lane: deque() for lane in Lane}
        self.stats: dict[Lane, LaneStats] = {lane: LaneStats() for lane in Lane}
        self._wakeup = asyncio.Event()
        both = (Lane.INTERACTIVE, Lane.BULK)
        self._tasks = [asyncio.create_task(self._worker(executor, both)) for _ in range(workers)]
        self._reserved_idle = 0  # reserved workers waiting for a question
        if reserved:
            assert reserved_executor is not None
            self._tasks += [asyncio.create_task(self._worker(reserved_executor, (Lane.INTERACTIVE,)))
                            for _ in range(reserved)]
        self.calls = 0

    def pending(self, lane: Lane) -> int:
        return len(self._pending[lane])

    async def embed(self, texts: list[str], lane: Lane = Lane.BULK) -> Embedded:
        """Vectors for texts in order; truncated lists indices into texts."""
        loop = asyncio.get_running_loop()
        items = [_Item(t, loop.create_future()) for t in texts]
        if lane is Lane.INTERACTIVE and priority.light():  # a light client's question: next
            self._pending[lane].extendleft(reversed(items))
        else:
            self._pending[lane].extend(items)
        self._wakeup.set()
        if len(items) == 1:  # a question: its one future, without gather's wrapping
            results = [await items[0].future]
        else:
            results = await asyncio.gather(*(it.future for it in items))
        if not results:
            return Embedded(Encoded(np.zeros((0, 0), dtype=np.float32), []), 0.0)
        vectors = np.stack([enc.vectors[row] for enc, row, _ in results])
        truncated = [i for i, (enc, row, _) in enumerate(results) if row in enc.truncated]
        wait = max(start - it.enqueued for it, (_, _, start) in zip(items, results, strict=True))
        return Embedded(Encoded(vectors, truncated), max(0.0, wait))

    def _take(self, pending: deque[_Item]) -> list[_Item]:
        n = min(len(pending), self.window)
        window = [pending.popleft() for _ in range(n)]
        oldest = window[0]
        window.sort(key=lambda it: len(it.text))
        at = next(i for i, it in enumerate(window) if it is oldest)
        start = min(max(0, at - self.batch_size // 2), max(0, len(window) - self.batch_size))
        batch = window[start:start + self.batch_size]
        rest = window[:start] + window[start + self.batch_size:]
        rest.sort(key=lambda it: it.enqueued)
        pending.extendleft(reversed(rest))
        return batch

    def _ready(self, lanes: Sequence[Lane]) -> Lane | None:
        """The lane a worker serving `lanes` takes next, None: nothing for it. A shared
        worker leaves the questions an idle reserved worker can take to it (its thread
        runs at normal priority, and the shared one's next bulk slice is not lost)."""
        shared = len(lanes) > 1
        for lane in lanes:
            pending = len(self._pending[lane])
            if shared and lane is Lane.INTERACTIVE:
                pending -= self._reserved_idle * self.batch_size
            if pending > 0:
                return lane
        return None

    async def _worker(self, executor: Executor, lanes: Sequence[Lane]) -> None:
        loop = asyncio.get_running_loop()
        reserved = len(lanes) == 1
        while True:
            lane = self._ready(lanes)
            while lane is None:
                self._wakeup.clear()
                self._reserved_idle += reserved
                try:
                    await self._wakeup.wait()
                finally:
                    self._reserved_idle -= reserved
                lane = self._ready(lanes)
            pending = self._pending[lane]
            if len(pending) < self.batch_size and self.max_wait > 0:
                delay = pending[0].enqueued + self.max_wait - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                    continue  # a question may have come meanwhile: choose the lane again
            batch = [it for it in self._take(pending) if not it.future.cancelled()]
            if not batch:
                continue
            if self._ready(lanes) is not None:
                self._wakeup.set()  # more work: let another idle worker look
            self.calls += 1
            stats = self.stats[lane]
            start = time.monotonic()
            stats.started(start, [it.enqueued for it in batch])
            try:
                enc = await _in_thread(loop, executor, self._run, [it.text for it in batch])
            except Exception as exc:  # the worker must outlive one failed call; waiters get why
                for it in batch:
                    if not it.future.done():
                        it.future.set_exception(exc)
                continue
            finally:
                stats.call_max_s = max(stats.call_max_s, time.monotonic() - start)
            for row, it in enumerate(batch):
                if not it.future.done():
                    it.future.set_result((enc, row, start))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pending in self._pending.values():
            while pending:
                it = pending.popleft()
                if not it.future.done():
                    it.future.cancel()


def _in_thread(loop: asyncio.AbstractEventLoop, executor: Executor,
               run: Callable[[list[str]], Encoded], texts: list[str]) -> asyncio.Future[Encoded]:
    """run(texts) on executor, its result set on an asyncio future from the thread: one
    call_soon_threadsafe, not run_in_executor's chain of a concurrent future and its
    callbacks (measured: the hand-off is most of embedd's own CPU around a question)."""
    fut: asyncio.Future[Encoded] = loop.create_future()

    def settle(result: Encoded | None, exc: BaseException | None) -> None:
        if fut.cancelled():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)  # type: ignore[arg-type]

    def job() -> None:
        try:
            result = run(texts)
        except BaseException as exc:  # handed to the awaiting worker, never lost here
            loop.call_soon_threadsafe(settle, None, exc)
            return
        loop.call_soon_threadsafe(settle, result, None)

    executor.submit(job)
    return fut
