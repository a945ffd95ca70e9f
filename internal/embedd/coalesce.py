"""Coalesce texts from concurrent requests into small model calls of similar length.

Measured on the 2-core target (see DECISIONS.md): small batches of similar length are
fastest, so a worker takes the oldest `window` pending texts, sorts them by length,
and runs the batch of `batch_size` that holds the oldest text. The oldest text is
always in the next call, so no text waits behind more than `window` others, and a
lone text waits at most `max_wait` for company.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from internal.embedd.local import Encoded


@dataclass
class _Item:
    text: str
    future: asyncio.Future[tuple[Encoded, int]]
    enqueued: float = field(default_factory=time.monotonic)


class Coalescer:
    """Runs `run(texts)` (a blocking model call) in `executor` on batches of texts."""

    def __init__(self, run: Callable[[list[str]], Encoded], executor: Executor, *,
                 batch_size: int, max_wait: float, workers: int, window: int = 0) -> None:
        self._run = run
        self._executor = executor
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.window = window or batch_size * 8
        self._pending: deque[_Item] = deque()
        self._wakeup = asyncio.Event()
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(workers)]
        self.calls = 0

    async def embed(self, texts: list[str]) -> Encoded:
        """Vectors for texts in order; truncated lists indices into texts."""
        loop = asyncio.get_running_loop()
        items = [_Item(t, loop.create_future()) for t in texts]
        self._pending.extend(items)
        self._wakeup.set()
        results = await asyncio.gather(*(it.future for it in items))
        if not results:
            return Encoded(np.zeros((0, 0), dtype=np.float32), [])
        vectors = np.stack([enc.vectors[row] for enc, row in results])
        truncated = [i for i, (enc, row) in enumerate(results) if row in enc.truncated]
        return Encoded(vectors, truncated)

    def _take(self) -> list[_Item]:
        n = min(len(self._pending), self.window)
        window = [self._pending.popleft() for _ in range(n)]
        oldest = window[0]
        window.sort(key=lambda it: len(it.text))
        at = next(i for i, it in enumerate(window) if it is oldest)
        start = min(max(0, at - self.batch_size // 2), max(0, len(window) - self.batch_size))
        batch = window[start:start + self.batch_size]
        rest = window[:start] + window[start + self.batch_size:]
        rest.sort(key=lambda it: it.enqueued)
        self._pending.extendleft(reversed(rest))
        return batch

    async def _worker(self) -> None:
        while True:
            while not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
            if len(self._pending) < self.batch_size:
                delay = self._pending[0].enqueued + self.max_wait - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not self._pending:
                    continue
            batch = [it for it in self._take() if not it.future.cancelled()]
            if not batch:
                continue
            loop = asyncio.get_running_loop()
            self.calls += 1
            try:
                enc = await loop.run_in_executor(self._executor, self._run,
                                                 [it.text for it in batch])
            except Exception as exc:  # the worker must outlive one failed call; waiters get why
                for it in batch:
                    if not it.future.done():
                        it.future.set_exception(exc)
                continue
            for row, it in enumerate(batch):
                if not it.future.done():
                    it.future.set_result((enc, row))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        while self._pending:
            it = self._pending.popleft()
            if not it.future.done():
                it.future.cancel()
