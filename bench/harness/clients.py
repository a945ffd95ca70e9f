"""Searching clients that run while something else does: the questions they ask, what they
measured, and a client that searches, thinks, and searches again until told to stop."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiohttp

from bench.harness.stacks import cli
from bench.harness.timing import pct

T = TypeVar("T")
CORPORA = ["handbook", "tickets"]  # docs/examples' corpora, the README's
STAGES = ("embed", "vectord", "matrixd", "outside")


@dataclass
class Searches:
    """Latencies (ms) and statuses of a client's searches, and each answered one's stages:
    matrixd's question embedding (embed_ms), vectord's search (its slowest corpus), matrixd's
    whole (took_ms), and what was outside matrixd (the client's time - took_ms)."""

    ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    stages: list[tuple[float, float, float, float]] = field(default_factory=list)
    at: list[float] = field(default_factory=list)  # when each answered (perf_counter)

    def add(self, other: Searches) -> None:
        self.ms += other.ms
        self.statuses.update(other.statuses)
        self.stages += other.stages
        self.at += other.at

    def over_time(self, start: float, window: float) -> list[list[float]]:
        """[seconds since start, p95 ms of the searches answered in that window]."""
        out: list[list[float]] = []
        end = max(self.at, default=start)
        t = start
        while t < end:
            xs = [m for m, a in zip(self.ms, self.at, strict=True) if t <= a < t + window]
            if xs:
                out.append([round(t - start + window / 2, 1), pct(xs, 95)])
            t += window
        return out

    def bad(self) -> int:
        return sum(n for st, n in self.statuses.items() if st != 200)

    def row(self, label: str, idle_p95: float) -> tuple[object, ...]:
        """label, n, p50, p95, max, p95 / idle p95, statuses other than 200."""
        return (label, len(self.ms), pct(self.ms, 50), pct(self.ms, 95),
                max(self.ms, default=float("nan")), pct(self.ms, 95) / idle_p95,
                dict(self.statuses) if self.bad() else "")

    def stage_row(self, label: str) -> tuple[object, ...]:
        """label, then p50 / p95 ms of each stage."""
        cols = [[st[i] for st in self.stages] for i in range(len(STAGES))]
        return (label, *(f"{pct(x, 50):.1f} / {pct(x, 95):.1f}" for x in cols))


ROW = ["searches", "n:d", "p50 ms:.1f", "p95 ms:.1f", "max ms:.1f", "p95 / idle:.2f", "not 200"]
STAGE_ROW = ["searches: p50 / p95 ms of", *STAGES]


class Questions:
    """BEIR queries in a seeded order, each text used once (a counter after a round)."""

    def __init__(self, data: Path) -> None:
        self.texts: list[str] = []
        for name in ("cranfield", "cisi", "scifact"):
            with (data / "data" / name / "queries.jsonl").open() as f:
                self.texts += [json.loads(line)["text"] for line in f]
        random.Random(38).shuffle(self.texts)
        self.n = 0

    def next(self) -> str:
        text = self.texts[self.n % len(self.texts)]
        rnd = self.n // len(self.texts)
        self.n += 1
        return text if rnd == 0 else f"{text} ({rnd})"


async def search(http: aiohttp.ClientSession, gateway: str, text: str, corpora: Sequence[str],
                 out: Searches) -> None:
    t0 = time.perf_counter()
    async with http.post(f"{gateway}/v1/matrix/search",
                         json={"query_text": text, "corpora": list(corpora)}) as resp:
        body = await resp.read()
        out.statuses[resp.status] += 1
    if resp.status == 200:
        ms = (time.perf_counter() - t0) * 1000
        out.ms.append(ms)
        out.at.append(time.perf_counter())
        answer = json.loads(body)
        took = float(answer.get("took_ms") or 0.0)
        out.stages.append((float(answer.get("embed_ms") or 0.0),
                           max((float(c.get("ms") or 0.0) for c in answer.get("corpora", [])),
                               default=0.0), took, ms - took))


async def searching(http: aiohttp.ClientSession, gateway: str, questions: Questions,
                    corpora: Sequence[str], think: float, stop: asyncio.Event,
                    out: Searches) -> None:
    """One client: a question, `think` seconds, the next, until stop."""
    while not stop.is_set():
        await search(http, gateway, questions.next(), corpora, out)
        if think:
            await asyncio.sleep(think)


async def while_searching(http: aiohttp.ClientSession, gateway: str, questions: Questions,
                          corpora: Sequence[str], think: float,
                          job: Callable[[], Awaitable[T]], clients: int = 2) -> tuple[T, Searches]:
    """job() with `clients` searching clients around it: (what job returns, the searches)."""
    stop, out = asyncio.Event(), Searches()
    tasks = [asyncio.create_task(searching(http, gateway, questions, corpora, think, stop, out))
             for _ in range(clients)]
    await asyncio.sleep(1.0)  # the searches are running before the job starts
    try:
        result = await job()
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    return result, out


async def prepare(root: Path, gateway: str, questions: Questions) -> None:
    """docs/examples' corpora ingested, and every part warmed by 20 searches."""
    for name in CORPORA:
        await cli(gateway, "ingest", str(root / "docs" / "examples" / f"{name}.jsonl"),
                  "--corpus", name, "--quiet")
    async with aiohttp.ClientSession() as http:
        for _ in range(20):
            await search(http, gateway, questions.next(), CORPORA, Searches())
