"""Soak: a mixed load at ~80% of peak for 10 minutes, with one embedd and one vectord kill.

A stack with a corpus of SciFact passages; the peak rate of the mix measured with a
closed loop, then the mix sent open-loop at --load of that rate for --minutes: vector
searches through the gateway, hybrid matrix searches with query text, embeddings of one
short text, upserts of one item. In the middle embedd, then vectord, get SIGKILL (the
supervisor restarts them). Every minute: requests, errors by status, p50/p99 and the RSS
of every daemon (with its workers) and of PostgreSQL's processes: their private memory
(USS), judged like a daemon's, and the shared pages they touched (PSS - USS), reported.
Requests in flight are capped (--max-inflight); a slot that finds the cap full is `shed`.

Targets: no 500; errors only within --grace seconds after a kill; each daemon's RSS in the
last minute within 10% of minute 2 (a killed daemon: of its second minute after restart).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import signal
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import psutil

from bench.harness import Run
from bench.harness.http import CORPORA, post
from bench.harness.stacks import Stack
from bench.harness.timing import pct

OPTIONS = {"minutes": 10.0, "load": 0.8, "kill_embedd_at": 4.0, "kill_vectord_at": 6.0,
           "grace": 20.0, "docs": 1000, "peak_seconds": 20.0, "concurrency": 16, "max_inflight": 128}
QUICK = {"minutes": 3.0, "kill_embedd_at": 1.0, "kill_vectord_at": 2.0, "docs": 200,
         "peak_seconds": 5.0}
DAEMONS = ("gateway", "embedd", "vectord", "matrixd", "syncd")
COLUMNS = (*DAEMONS, "postgres", "pg shared")
MIX = (("vector", 0.4), ("matrix", 0.3), ("embed", 0.15), ("upsert", 0.15))


@dataclass
class Minute:
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    latencies: list[float] = field(default_factory=list)
    errors_at: list[float] = field(default_factory=list)  # seconds since start
    shed: int = 0


class Mix:
    """One request of the mix at a time, against the gateway."""

    def __init__(self, base: str, http: aiohttp.ClientSession, docs: list[str], dim: int,
                 model: str) -> None:
        self.base, self.http, self.docs, self.dim, self.model = base, http, docs, dim, model
        self.rng, self.n = random.Random(11), 0

    def vec(self) -> list[float]:
        v = [self.rng.gauss(0, 1) for _ in range(self.dim)]
        s = sum(x * x for x in v) ** 0.5
        return [x / s for x in v]

    def query(self) -> str:
        words = self.rng.choice(self.docs).split()
        start = self.rng.randrange(max(1, len(words) - 6))
        return " ".join(words[start:start + 6])

    def request(self, kind: str) -> tuple[str, dict[str, Any]]:
        b, c = self.base, f"{self.base}{CORPORA}/soak"
        if kind == "vector":
            return f"{c}/search", {"mode": "vector", "query_vector": self.vec(), "k": 10}
        if kind == "matrix":
            return f"{b}/v1/matrix/search", {"corpora": ["soak"], "query_text": self.query(), "k": 10}
        if kind == "embed":
            return f"{b}/v1/embed", {"texts": [self.query()], "input_type": "query"}
        self.n += 1
        return f"{c}/items", {"items": [{"id": f"soak-{self.n}", "vector": self.vec(),
                                         "text": self.query()}], "model": self.model}

    async def send(self, kind: str) -> tuple[int, float]:
        url, body = self.request(kind)
        t0 = time.perf_counter()
        try:
            async with self.http.post(url, json=body) as resp:
                await resp.read()
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError):
            status = 0
        return status, (time.perf_counter() - t0) * 1000

    def pick(self) -> str:
        r = self.rng.random()
        for kind, w in MIX:
            if r < w:
                return kind
            r -= w
        return MIX[-1][0]


def rss_mb(stack: Stack) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in DAEMONS:
        try:
            p = stack.daemon(name)
            out[name] = sum(q.memory_info().rss for q in [p, *p.children(recursive=True)]) / 2**20
        except (SystemExit, psutil.NoSuchProcess):
            out[name] = float("nan")
    try:  # shared_buffers counts once: private memory (USS) apart from the shared pages
        infos = [p.memory_full_info() for p in stack.processes() if "postgres" in p.name()]
        out["postgres"] = sum(i.uss for i in infos) / 2**20
        out["pg shared"] = sum(i.pss - i.uss for i in infos) / 2**20
    except psutil.Error:
        out["postgres"] = out["pg shared"] = float("nan")
    return out


async def soak(run: Run, stack: Stack, mix: Mix, rate: float) -> tuple[list[Minute], list[Any], list[Any]]:
    a = run.args
    minutes = [Minute() for _ in range(int(a.minutes + 0.999))]
    rss: list[dict[str, float]] = []
    kills: list[tuple[float, str]] = []
    inflight: set[asyncio.Task[None]] = set()
    start = time.monotonic()
    pending = sorted([(a.kill_embedd_at * 60, "embedd"), (a.kill_vectord_at * 60, "vectord")])

    async def one(kind: str, at: float) -> None:
        status, ms = await mix.send(kind)
        m = minutes[min(len(minutes) - 1, int((at - start) // 60))]
        m.statuses[status] += 1
        m.latencies.append(ms)
        if status != 200:
            m.errors_at.append(time.monotonic() - start)

    i = 0
    while (at := start + i / rate) < start + a.minutes * 60:
        if at > time.monotonic():
            await asyncio.sleep(at - time.monotonic())
        now = time.monotonic()
        while pending and now - start >= pending[0][0]:
            _, victim = pending.pop(0)
            os.kill(stack.daemon(victim).pid, signal.SIGKILL)
            kills.append((now - start, victim))
        while now - start >= (len(rss) + 1) * 60 and len(rss) < len(minutes):
            rss.append(rss_mb(stack))
            run.progress(f"minute {len(rss)}: {sum(minutes[len(rss) - 1].statuses.values())} requests")
        if len(inflight) >= a.max_inflight:
            minutes[min(len(minutes) - 1, int((now - start) // 60))].shed += 1
        else:
            task = asyncio.ensure_future(one(mix.pick(), now))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        i += 1
    if inflight:
        await asyncio.wait(inflight, timeout=40)
    while len(rss) < len(minutes):
        rss.append(rss_mb(stack))
    return minutes, rss, kills


async def main(run: Run) -> None:
    a = run.args
    docs: list[str] = []
    with run.need("data", "scifact", "corpus.jsonl").open() as f:
        for line in f:
            d = json.loads(line)
            docs.append(f"{d.get('title', '')}\n{d.get('text', '')}".strip()[:1500])
    docs = docs[:1000]
    with run.stack() as stack:
        base = stack.gateway
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30),
                                         connector=aiohttp.TCPConnector(limit=a.max_inflight)) as http:
            emb = await post(http, f"{base}/v1/embed", {"texts": docs[:1]})
            dim, model = int(emb["dim"]), str(emb["model"])
            await post(http, f"{base}{CORPORA}", {"name": "soak", "dim": dim, "model": model})
            for first in range(0, a.docs, 32):
                batch = docs[first:first + 32]
                vecs = (await post(http, f"{base}/v1/embed", {"texts": batch}))["vectors"]
                await post(http, f"{base}{CORPORA}/soak/items", {"model": model, "items": [
                    {"id": f"doc-{first + i}", "vector": v, "text": t}
                    for i, (t, v) in enumerate(zip(batch, vecs, strict=True))]})
            mix = Mix(base, http, docs, dim, model)
            done, end = 0, time.monotonic() + a.peak_seconds

            async def worker() -> None:
                nonlocal done
                while time.monotonic() < end:
                    await mix.send(mix.pick())
                    done += 1
            t0 = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(a.concurrency)))
            peak = done / (time.monotonic() - t0)
            run.say(f"peak {peak:.1f} req/s (closed loop, {a.concurrency} clients); soak at "
                    f"{a.load:.0%} = {peak * a.load:.1f} req/s for {a.minutes:g} min; kills: embedd "
                    f"at {a.kill_embedd_at:g} min, vectord at {a.kill_vectord_at:g} min")
            minutes, rss, kills = await soak(run, stack, mix, peak * a.load)
    run.table("each minute: requests, errors by status, latency, RSS MB (postgres: private, pg "
              "shared: shared pages by PSS)", ["min:d", "requests:d", "shed:d", "errors by status",
                                                "p50 ms:.1f", "p99 ms:.1f", *(f"{c}:.0f" for c in COLUMNS)],
              [(n + 1, sum(m.statuses.values()), m.shed,
                json.dumps({s: c for s, c in sorted(m.statuses.items()) if s != 200}),
                statistics.median(m.latencies) if m.latencies else float("nan"),
                pct(m.latencies, 99), *(r[c] for c in COLUMNS))
               for n, (m, r) in enumerate(zip(minutes, rss, strict=True))])
    verdict(run, minutes, rss, kills)


def verdict(run: Run, minutes: list[Minute], rss: list[dict[str, float]],
            kills: list[tuple[float, str]]) -> None:
    statuses: collections.Counter[int] = sum((m.statuses for m in minutes), collections.Counter())
    errors_at = [t for m in minutes for t in m.errors_at]
    stray = [t for t in errors_at if not any(0 <= t - k <= run.args.grace for k, _ in kills)]
    run.say(f"requests {sum(statuses.values())}, shed {sum(m.shed for m in minutes)}, by status "
            f"{dict(sorted(statuses.items()))}; kills: " + ", ".join(f"{v} at {t:.0f} s" for t, v in kills))
    run.say(f"no 500: {statuses.get(500, 0)} -> {'met' if not statuses.get(500) else 'NOT met'}")
    run.say(f"errors only within {run.args.grace:g} s after a kill: {len(errors_at)} errors, "
            f"{len(stray)} elsewhere -> {'met' if not stray else 'NOT met'}")
    for d in (*DAEMONS, "postgres"):
        killed = [t for t, v in kills if v == ("vectord" if d == "postgres" else d)]
        ref = 2 if not killed else int(killed[0] // 60) + 3
        if len(rss) < 3 or ref >= len(rss):
            run.say(f"RSS {d}: no reference minute after its restart")
            continue
        growth = rss[-1][d] / rss[ref - 1][d] - 1
        run.say(f"RSS {d}: minute {ref} {rss[ref - 1][d]:.0f} MB -> minute {len(rss)} "
                f"{rss[-1][d]:.0f} MB ({growth:+.1%}) -> {'met' if abs(growth) <= 0.10 else 'NOT met'}")
