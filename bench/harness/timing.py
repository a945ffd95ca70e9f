"""What every benchmark times with: percentiles, one call's milliseconds, a closed loop at
a concurrency, turns that alternate the compared systems, and CPU seconds of processes.

One percentile for every benchmark: numpy's (linear between the two nearest ranks)."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
import psutil

T = TypeVar("T")


def pct(values: Iterable[float], p: float) -> float:
    """The p-th percentile (0-100); NaN of nothing."""
    xs = list(values)
    return float(np.percentile(np.array(xs), p)) if xs else float("nan")


def median(values: Iterable[float]) -> float:
    xs = list(values)
    return statistics.median(xs) if xs else float("nan")


async def ms(call: Awaitable[Any]) -> float:
    """Milliseconds the awaitable takes."""
    t0 = time.perf_counter()
    await call
    return (time.perf_counter() - t0) * 1000


async def one_at_a_time(fn: Callable[[T], Awaitable[Any]], items: Iterable[T]) -> list[float]:
    """fn(item) for each item in turn: each one's milliseconds."""
    return [await ms(fn(item)) for item in items]


async def closed_loop(fn: Callable[[T], Awaitable[Any]], items: Sequence[T], concurrency: int
                      ) -> tuple[list[float], float]:
    """fn(item) for every item, `concurrency` in flight: each one's milliseconds and the
    wall seconds of all (len(items) / wall is the QPS)."""
    todo = list(reversed(items))
    out: list[float] = []

    async def worker() -> None:
        while todo:
            out.append(await ms(fn(todo.pop())))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out, time.perf_counter() - t0


async def qps(fn: Callable[[T], Awaitable[Any]], items: Sequence[T], concurrency: int) -> float:
    got, wall = await closed_loop(fn, items, concurrency)
    return len(got) / wall


def rotated(names: Sequence[T], rnd: int) -> list[T]:
    """The systems in round rnd's order: each goes first in turn."""
    k = rnd % len(names) if names else 0
    return [*names[k:], *names[:k]]


def alternated(names: Sequence[T], rnd: int) -> list[T]:
    """The systems in order in even rounds, reversed in odd ones."""
    return list(names) if rnd % 2 == 0 else list(reversed(names))


def shuffled(names: Sequence[T], rng: random.Random) -> list[T]:
    """A turn in a seeded random order: each goes first, and follows each other one,
    equally often on average (a fixed order favours some)."""
    return rng.sample(list(names), len(names))


def cpu_seconds(procs: Iterable[psutil.Process], group: Callable[[psutil.Process], str]
                ) -> dict[int, tuple[str, float]]:
    """pid -> (its group, user + system CPU seconds) of every process still running."""
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[p.pid] = (group(p), t.user + t.system)
        except psutil.Error:
            pass  # a backend that ended
    return out


def spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
          ) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a new process counts from 0)."""
    out: dict[str, float] = defaultdict(float)
    for pid, (group, cpu) in after.items():
        out[group] += cpu - (before[pid][1] if pid in before else 0.0)
    return out
