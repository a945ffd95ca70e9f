"""Soak: mixed load at ~80% of peak for 10 minutes, with one embedd and one vectord kill.

Starts the whole stack (`lakehouse up`, temporary data dir, loopback ports), loads a
corpus of SciFact passages (or synthetic text when ../shared is absent), measures the
peak rate of the mix with a closed loop, then sends the mix open-loop at `--load` (0.8)
of that rate for `--minutes`. The mix: vector searches through the gateway, hybrid
matrix searches with query text (embedd + vectord), embeddings of one short text, and
upserts of one item. In the middle embedd, then vectord, get SIGKILL (the supervisor
restarts them). Every minute it prints requests, errors by status, p50/p99 latency and
the RSS of every daemon (with its worker processes) and of PostgreSQL's processes
together: their private memory (USS), judged like a daemon's, and the shared pages they
touched (by PSS, so shared_buffers counts once; it fills as the upserts grow the corpus
about tenfold, up to shared_buffers), reported only.

Targets (printed at the end): no 500 at all; errors only in the seconds right after a
kill (`--grace`, default 20 s); each daemon's RSS in the last minute within 10% of
minute 2 (for a killed daemon, of its second minute after the restart).

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_soak.py \
        [--minutes 10] [--load 0.8] [--kill-embedd-at 4] [--kill-vectord-at 6]

Bounded: requests in flight are capped (`--max-inflight`); a slot that finds the cap
full is counted as `shed`, not queued. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.stack.postgres import postmaster_pid  # noqa: E402
from tests.helpers import shared_dir  # noqa: E402
from tests.stack import upstack  # noqa: E402

CORPUS = "soak"
DAEMONS = ("gateway", "embedd", "vectord", "matrixd", "syncd")
COLUMNS = (*DAEMONS, "postgres", "pg shared")
MIX = (("vector", 0.4), ("matrix", 0.3), ("embed", 0.15), ("upsert", 0.15))


@dataclass
class Minute:
    requests: int = 0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    latencies: list[float] = field(default_factory=list)
    errors_at: list[float] = field(default_factory=list)  # seconds since start
    shed: int = 0


def texts() -> list[str]:
    path = shared_dir() / "data" / "scifact" / "corpus.jsonl"
    out: list[str] = []
    if path.exists():
        with path.open() as f:
            for line in f:
                doc = json.loads(line)
                text = f"{doc.get('title', '')}\n{doc.get('text', '')}".strip()
                if text:
                    out.append(text[:1500])
                if len(out) >= 1000:
                    break
    if not out:
        rng = random.Random(5)
        words = "vitamin bone density protein cell gene cancer trial dose risk blood".split()
        out = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(1000)]
    return out


class Mix:
    """One request of the mix at a time, against the gateway."""

    def __init__(self, base: str, http: aiohttp.ClientSession, docs: list[str], dim: int,
                 model: str) -> None:
        self.base, self.http, self.docs, self.dim, self.model = base, http, docs, dim, model
        self.rng = random.Random(11)
        self.n = 0

    def _vec(self) -> list[float]:
        v = [self.rng.gauss(0, 1) for _ in range(self.dim)]
        s = sum(x * x for x in v) ** 0.5
        return [x / s for x in v]

    def _query(self) -> str:
        words = self.rng.choice(self.docs).split()
        start = self.rng.randrange(max(1, len(words) - 6))
        return " ".join(words[start:start + 6])

    def request(self, kind: str) -> tuple[str, dict[str, Any]]:
        b = self.base
        if kind == "vector":
            return (f"{b}/v1/vectors/corpora/{CORPUS}/search",
                    {"mode": "vector", "query_vector": self._vec(), "k": 10})
        if kind == "matrix":
            return (f"{b}/v1/matrix/search",
                    {"corpora": [CORPUS], "query_text": self._query(), "k": 10})
        if kind == "embed":
            return f"{b}/v1/embed", {"texts": [self._query()], "input_type": "query"}
        self.n += 1
        return (f"{b}/v1/vectors/corpora/{CORPUS}/items",
                {"items": [{"id": f"soak-{self.n}", "vector": self._vec(),
                            "text": self._query()}], "model": self.model})

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


async def peak_rate(mix: Mix, seconds: float, concurrency: int) -> float:
    done = 0
    end = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < end:
            await mix.send(mix.pick())
            done += 1

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.monotonic() - t0)


def rss_mb(stack: upstack.Stack) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in DAEMONS:
        try:
            p = psutil.Process(stack.daemon_pid(name))
            procs = [p, *p.children(recursive=True)]
            out[name] = sum(q.memory_info().rss for q in procs) / 2**20
        except (AssertionError, psutil.NoSuchProcess):
            out[name] = float("nan")
    # PostgreSQL's processes share shared_buffers: summing their RSS would count it once
    # per backend. "postgres" is their private memory (USS summed: what a leak would grow,
    # judged like a daemon's RSS); "pg shared" the shared pages they have touched (PSS -
    # USS: mostly the buffer cache, which fills as the upserts grow the corpus, capped by
    # shared_buffers; reported, not judged).
    pg = postmaster_pid(stack.tmp / "pg")
    try:
        procs = [psutil.Process(pg), *psutil.Process(pg).children()] if pg else []
        infos = [p.memory_full_info() for p in procs]
        out["postgres"] = sum(i.uss for i in infos) / 2**20
        out["pg shared"] = sum(i.pss - i.uss for i in infos) / 2**20
    except psutil.NoSuchProcess:
        out["postgres"] = out["pg shared"] = float("nan")
    return out


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def run(args: argparse.Namespace) -> int:
    stack = upstack.start("lakehouse-bench-soak-", {"LAKEHOUSE_LOG_LEVEL": "warning"})
    try:
        return await soak(stack, args)
    finally:
        stack.stop()
        shutil.rmtree(stack.tmp, ignore_errors=True)


async def soak(stack: upstack.Stack, args: argparse.Namespace) -> int:
    base = stack.url
    docs = texts()
    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=args.max_inflight)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        async with http.post(f"{base}/v1/embed", json={"texts": docs[:1]}) as r:
            emb = await r.json()
        dim, model = int(emb["dim"]), str(emb["model"])
        async with http.post(f"{base}/v1/vectors/corpora",
                             json={"name": CORPUS, "dim": dim, "model": model}) as r:
            assert r.status == 201, await r.text()
        for first in range(0, args.docs, 32):
            batch = docs[first:first + 32]
            async with http.post(f"{base}/v1/embed", json={"texts": batch}) as r:
                vecs = (await r.json())["vectors"]
            items = [{"id": f"doc-{first + i}", "vector": v, "text": t}
                     for i, (t, v) in enumerate(zip(batch, vecs, strict=True))]
            async with http.post(f"{base}/v1/vectors/corpora/{CORPUS}/items",
                                 json={"items": items, "model": model}) as r:
                assert r.status == 200, await r.text()
        mix = Mix(base, http, docs, dim, model)
        peak = await peak_rate(mix, args.peak_seconds, args.concurrency)
        rate = peak * args.load
        print(f"stack {base}; corpus {args.docs} docs x {dim}; mix "
              + ", ".join(f"{k} {w:.0%}" for k, w in MIX))
        print(f"peak {peak:.1f} req/s (closed loop, {args.concurrency} clients, "
              f"{args.peak_seconds:g} s); soak at {args.load:.0%} = {rate:.1f} req/s for "
              f"{args.minutes:g} min; kills: embedd at {args.kill_embedd_at:g} min, "
              f"vectord at {args.kill_vectord_at:g} min\n", flush=True)

        minutes = [Minute() for _ in range(int(args.minutes + 0.999))]
        rss: list[dict[str, float]] = []
        kills: list[tuple[float, str]] = []
        inflight: set[asyncio.Task[None]] = set()
        start = time.monotonic()
        end = start + args.minutes * 60

        async def one(kind: str, at: float) -> None:
            status, ms = await mix.send(kind)
            m = minutes[min(len(minutes) - 1, int((at - start) // 60))]
            m.requests += 1
            m.statuses[status] += 1
            m.latencies.append(ms)
            if status != 200:
                m.errors_at.append(time.monotonic() - start)

        pending_kills = sorted([(args.kill_embedd_at * 60, "embedd"),
                                (args.kill_vectord_at * 60, "vectord")])
        next_minute = 1
        i = 0
        print(f"{'min':>3} {'requests':>8} {'shed':>5} {'errors by status':<24} {'p50 ms':>7} "
              f"{'p99 ms':>7}  " + " ".join(f"{d:>8}" for d in COLUMNS)
              + "  (RSS MB; postgres: private, pg shared: shared pages by PSS)", flush=True)
        while True:
            at = start + i / rate
            if at >= end:
                break
            now = time.monotonic()
            if at > now:
                await asyncio.sleep(at - now)
            now = time.monotonic()
            while pending_kills and now - start >= pending_kills[0][0]:
                _, victim = pending_kills.pop(0)
                pid = stack.daemon_pid(victim)
                os.kill(pid, signal.SIGKILL)
                kills.append((now - start, victim))
            while now - start >= next_minute * 60 and next_minute <= len(minutes):
                rss.append(rss_mb(stack))
                report(next_minute, minutes[next_minute - 1], rss[-1])
                next_minute += 1
            if len(inflight) >= args.max_inflight:
                minutes[min(len(minutes) - 1, int((now - start) // 60))].shed += 1
            else:
                task = asyncio.ensure_future(one(mix.pick(), now))
                inflight.add(task)
                task.add_done_callback(inflight.discard)
            i += 1
        if inflight:
            await asyncio.wait(inflight, timeout=40)
        while next_minute <= len(minutes):
            rss.append(rss_mb(stack))
            report(next_minute, minutes[next_minute - 1], rss[-1])
            next_minute += 1
    return verdict(minutes, rss, kills, args)


def report(n: int, m: Minute, rss: dict[str, float]) -> None:
    errors = {s: c for s, c in sorted(m.statuses.items()) if s != 200}
    print(f"{n:>3} {m.requests:>8} {m.shed:>5} {json.dumps(errors):<24} "
          f"{statistics.median(m.latencies) if m.latencies else float('nan'):>7.1f} "
          f"{pct(m.latencies, 99):>7.1f}  "
          + " ".join(f"{rss[d]:>8.0f}" for d in COLUMNS), flush=True)


def verdict(minutes: list[Minute], rss: list[dict[str, float]], kills: list[tuple[float, str]],
            args: argparse.Namespace) -> int:
    total = sum(m.requests for m in minutes)
    statuses: collections.Counter[int] = collections.Counter()
    for m in minutes:
        statuses.update(m.statuses)
    errors_at = [t for m in minutes for t in m.errors_at]
    stray = [t for t in errors_at if not any(0 <= t - k <= args.grace for k, _ in kills)]
    print(f"\nrequests {total}, shed {sum(m.shed for m in minutes)}, by status "
          f"{dict(sorted(statuses.items()))}")
    print("kills: " + ", ".join(f"{v} at {t:.0f} s" for t, v in kills))
    ok = True
    n500 = statuses.get(500, 0)
    print(f"no 500: {n500} -> {'met' if n500 == 0 else 'NOT met'}")
    ok &= n500 == 0
    print(f"errors only within {args.grace:g} s after a kill: {len(errors_at)} errors, "
          f"{len(stray)} elsewhere{' (first at ' + f'{stray[0]:.0f} s)' if stray else ''} -> "
          f"{'met' if not stray else 'NOT met'}")
    ok &= not stray
    if len(rss) >= 3:
        last = rss[-1]
        for d in (*DAEMONS, "postgres"):
            # PostgreSQL's backends are vectord's pool connections: a vectord kill replaces
            # them, so its reference minute is vectord's.
            killed_at = [t for t, v in kills if v == ("vectord" if d == "postgres" else d)]
            ref_min = 2 if not killed_at else int(killed_at[0] // 60) + 3
            if ref_min >= len(rss):
                print(f"RSS {d}: no reference minute after its restart")
                continue
            ref = rss[ref_min - 1][d]
            growth = last[d] / ref - 1 if ref else float("nan")
            met = abs(growth) <= 0.10
            ok &= met
            print(f"RSS {d}: minute {ref_min} {ref:.0f} MB -> minute {len(rss)} {last[d]:.0f} MB "
                  f"({growth:+.1%}) -> {'met' if met else 'NOT met'}")
    print("all targets met" if ok else "some targets NOT met")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--load", type=float, default=0.8, help="share of the measured peak rate")
    ap.add_argument("--kill-embedd-at", type=float, default=4.0, help="minute")
    ap.add_argument("--kill-vectord-at", type=float, default=6.0, help="minute")
    ap.add_argument("--grace", type=float, default=20.0, help="seconds after a kill errors may occur")
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--peak-seconds", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-inflight", type=int, default=128)
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
