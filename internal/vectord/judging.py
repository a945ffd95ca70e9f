"""Upserts' language verdicts, judged in a process of their own at the writes' priority.

lingua holds the interpreter's lock for a whole judgement (about 2 ms a SciFact abstract)
and an `auto` corpus's upsert judges every item: judged in vectord's own threads, a bulk
ingest's verdicts took a fifth of a core at the normal OS priority and kept the event
loop, the searches' Python, waiting for the lock at every wake-up. In a process of its
own (one worker, spawned at the first verdict asked, at `[vectord] write_nice` as the
writes' PostgreSQL backends are) they share neither the lock nor the searches' priority.

One worker per vectord process (per priority), shared by its applications (the tests
start several), stopped when the process exits. A worker that dies is replaced once; a
verdict it could not give is judged here, in a thread, as before (`judged_here` counts
them): the write goes on either way, and the failure is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import structlog

from internal.common import language

log = structlog.get_logger()


_PR_SET_PDEATHSIG = 1


def _start(nice: int) -> None:
    """The worker's initializer: SIGTERM when vectord goes (Linux; a worker waiting on
    its queue would otherwise outlive a vectord killed outright), its priority lowered,
    lingua's detector loaded."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if nice:
        os.nice(nice)
    language.judge("A sentence of English prose, so that the detector is loaded at start.")


def _judge_all(texts: Sequence[str]) -> list[language.Verdict]:
    return [language.judge(t) for t in texts]


def _in_thread(texts: Sequence[str]) -> list[language.Verdict]:
    """The verdicts judged in this process (the fallback), handing the interpreter's lock
    to the event loop after each one."""
    import time

    out = []
    for t in texts:
        out.append(language.judge(t))
        time.sleep(0)
    return out


# The worker pool of each priority, made at its first verdict asked. spawn: vectord runs
# threads (the event loop's executors, psycopg's), which a forked child must not inherit
# mid-flight.
_POOLS: dict[int, ProcessPoolExecutor] = {}


def _pool(nice: int) -> ProcessPoolExecutor:
    pool = _POOLS.get(nice)
    if pool is None:
        pool = _POOLS[nice] = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start, initargs=(nice,))
    return pool


def _drop(nice: int, broken: ProcessPoolExecutor) -> None:
    """The broken pool forgotten (the next verdict starts a new worker)."""
    if _POOLS.get(nice) is broken:
        del _POOLS[nice]
    broken.shutdown(wait=False, cancel_futures=True)


class Judge:
    """lingua's verdicts for texts, from the worker process (worker False: here, in a
    thread, as before the worker existed: `[vectord] language_worker`)."""

    def __init__(self, nice: int, *, worker: bool = True) -> None:
        self.nice = nice
        self.worker = worker
        self.judged_here = 0  # texts judged in vectord itself (the worker was unavailable)

    async def verdicts(self, texts: Sequence[str]) -> list[language.Verdict]:
        if not texts:
            return []
        if self.worker:
            loop = asyncio.get_running_loop()
            for attempt in (1, 2):
                pool = _pool(self.nice)
                try:
                    return await loop.run_in_executor(pool, _judge_all, list(texts))
                except BrokenProcessPool as exc:
                    log.warning("language_worker_lost", attempt=attempt, error=str(exc))
                    _drop(self.nice, pool)
        self.judged_here += len(texts) if self.worker else 0
        return await asyncio.to_thread(_in_thread, texts)

    def worker_pid(self) -> int | None:
        """The worker process's id, None before the first verdict (tests)."""
        pool = _POOLS.get(self.nice)
        processes = getattr(pool, "_processes", None) or {}
        return next(iter(processes), None)
