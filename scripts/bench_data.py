"""The synthetic vectors of the vector benchmarks, what they are scored against, and
the few helpers every one of them times with.

A Gaussian mixture (a random centre plus noise, L2-normalised) is clustered the way real
embeddings are; the exact top k by numpy is the truth recall@k is measured against.
Imports nothing of the project, so a benchmark built on it keeps working when the
service's modules move."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def mixture(n: int, dim: int, centres: int, seed: int) -> F32:
    """n L2-normalised points: a random centre plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim)).astype(np.float32)
    which = rng.integers(0, centres, size=n)
    pts = means[which] + 0.5 * rng.standard_normal((n, dim)).astype(np.float32)
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    return pts


def exact_top(data: F32, queries: F32, k: int, block: int = 200) -> npt.NDArray[np.int64]:
    """The k nearest rows of data to each query by inner product (cosine, as both are
    normalised), best first; in blocks of queries so a million rows fit in memory."""
    out = []
    for start in range(0, len(queries), block):
        sims = queries[start:start + block] @ data.T
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.take_along_axis(-sims, top, axis=1).argsort(axis=1)
        out.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(out)


def item_id(i: int) -> str:
    return f"p{i:07d}"


def recall(found: Sequence[Sequence[str]], truth: npt.NDArray[np.int64]) -> float:
    """Share of the true top k found, over every query (found[i] answers query i)."""
    k = truth.shape[1]
    hits = sum(len({item_id(int(j)) for j in truth[i]} & set(ids)) for i, ids in enumerate(found))
    return hits / (len(found) * k)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.array(values), p))


async def qps(total: int, concurrency: int, fn: Callable[[int], Awaitable[Any]]) -> float:
    """Calls a second of fn(0) ... fn(total - 1), `concurrency` of them in flight."""
    counter = iter(range(total))

    async def worker() -> None:
        for i in counter:
            await fn(i)

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - t)


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
