"""bench_load's stack, searchers and bulk jobs; scripts/bench_load.py runs them (its
docstring says what is measured and how).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_gateway import python_of  # noqa: E402

T = TypeVar("T")

CORPORA = ["handbook", "tickets"]
MODEL = "local"  # the local model in its configured numerics, whatever its id
REEMBED_DOCS = 1400
WIKI_PAGES = 500


@dataclass
class Searches:
    """Latencies (ms) and statuses of one client's searches."""

    ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    # Per search answered: matrixd's question embedding (embed_ms), vectord's search (its
    # slowest corpus's ms), matrixd's whole (took_ms), and what was outside matrixd (the
    # gateway, the client, the network: the client's time - took_ms).
    stages: list[tuple[float, float, float, float]] = field(default_factory=list)

    def add(self, other: Searches) -> None:
        self.ms += other.ms
        self.statuses.update(other.statuses)
        self.stages += other.stages


class Questions:
    """BEIR queries, each text used once (a counter after a round)."""

    def __init__(self, data: Path) -> None:
        self.texts: list[str] = []
        for name in ("cranfield", "cisi", "scifact"):
            with (data / name / "queries.jsonl").open() as f:
                self.texts += [json.loads(line)["text"] for line in f]
        random.Random(38).shuffle(self.texts)
        self.n = 0

    def next(self) -> str:
        text = self.texts[self.n % len(self.texts)]
        rnd = self.n // len(self.texts)
        self.n += 1
        return text if rnd == 0 else f"{text} ({rnd})"


async def search(session: aiohttp.ClientSession, gateway: str, text: str, out: Searches) -> None:
    t0 = time.perf_counter()
    async with session.post(f"{gateway}/v1/matrix/search",
                            json={"query_text": text, "corpora": CORPORA}) as resp:
        body = await resp.read()
        out.statuses[resp.status] += 1
    if resp.status == 200:
        ms = (time.perf_counter() - t0) * 1000
        out.ms.append(ms)
        answer = json.loads(body)
        took = float(answer.get("took_ms") or 0.0)
        out.stages.append((float(answer.get("embed_ms") or 0.0),
                           max((float(c.get("ms") or 0.0) for c in answer.get("corpora", [])),
                               default=0.0), took, ms - took))


async def searching(session: aiohttp.ClientSession, gateway: str, questions: Questions,
                    think: float, stop: asyncio.Event, out: Searches) -> None:
    """One client: a question, `think` seconds, the next, until stop."""
    while not stop.is_set():
        await search(session, gateway, questions.next(), out)
        if think:
            await asyncio.sleep(think)


async def while_searching(session: aiohttp.ClientSession, gateway: str, questions: Questions,
                          think: float, job: Callable[[], Awaitable[float]]
                          ) -> tuple[float, Searches]:
    """job() with two searching clients around it: (what job returns, the searches)."""
    stop = asyncio.Event()
    out = Searches()
    clients = [asyncio.create_task(searching(session, gateway, questions, think, stop, out))
               for _ in range(2)]
    await asyncio.sleep(1.0)  # the searches are running before the job starts
    try:
        result = await job()
    finally:
        stop.set()
        await asyncio.gather(*clients)
    return result, out


async def cli(gateway: str, *args: str, root: Path = ROOT) -> float:
    """Run `lakehouse ARGS` of the checkout at root (its own interpreter) against the
    stack; its wall time in seconds."""
    env = {**os.environ, "LAKEHOUSE_URL": gateway}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        python_of(root), "-m", "internal.cli.main", *args, cwd=root, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"lakehouse {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{out.decode()[-2000:]}")
    return took


def tagged_docs(data: Path, sets: tuple[str, ...], tag: str) -> list[dict[str, Any]]:
    """The sets' documents, ids prefixed by set, a run tag at the end of every text."""
    docs = []
    for name in sets:
        with (data / name / "corpus.jsonl").open() as f:
            for line in f:
                d = json.loads(line)
                docs.append({"_id": f"{name[:2]}-{d['_id']}", "title": d.get("title") or "",
                             "text": f"{d['text']} [{tag}]"})
    return docs


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def write_wiki(folder: Path, data: Path, tag: str, pages: int) -> Path:
    """pages markdown pages, two sections each, from SciFact's abstracts."""
    docs = tagged_docs(data, ("scifact",), tag)
    folder.mkdir(parents=True)
    for i in range(pages):
        a, b = docs[i], docs[i + pages]
        (folder / f"page-{i:03d}.md").write_text(
            f"# {a['title'] or a['_id']}\n\n{a['text']}\n\n"
            f"## {b['title'] or b['_id']}\n\n{b['text']}\n")
    return folder


async def load_unembedded(session: aiohttp.ClientSession, gateway: str, corpus: str,
                          docs: list[dict[str, Any]]) -> None:
    """A corpus of random vectors and no model: what `reembed` then embeds."""
    async with session.post(f"{gateway}/v1/vectors/corpora",
                            json={"name": corpus, "dim": 384}) as r:
        assert r.status == 201, await r.text()
    rng = np.random.default_rng(38)
    for s in range(0, len(docs), 500):
        part = docs[s:s + 500]
        vecs = rng.standard_normal((len(part), 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        items = [{"id": d["_id"], "title": d["title"], "text": d["text"], "vector": v.tolist()}
                 for d, v in zip(part, vecs, strict=True)]
        async with session.post(f"{gateway}/v1/vectors/corpora/{corpus}/items",
                                json={"items": items}) as r:
            assert r.status == 200, await r.text()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))] if xs else float("nan")


def row(label: str, s: Searches, idle_p95: float) -> str:
    bad = sum(n for st, n in s.statuses.items() if st != 200)
    return (f"{label:<34} {len(s.ms):>8} {pct(s.ms, 50):>8.1f} {pct(s.ms, 95):>8.1f} "
            f"{max(s.ms, default=float('nan')):>8.1f} {pct(s.ms, 95) / idle_p95:>8.2f}x"
            f"{f'  ({bad} not 200: {dict(s.statuses)})' if bad else ''}")


class Busy:
    """The machine's CPU busy share over phases (psutil.cpu_times: every process, so a
    quiet machine is what makes it the stack's): per label, busy and total CPU seconds."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    async def measure(self, label: str, work: Awaitable[T]) -> T:
        t0 = psutil.cpu_times()
        try:
            return await work
        finally:
            t1 = psutil.cpu_times()
            total = sum(t1) - sum(t0)
            free = (t1.idle - t0.idle) + (getattr(t1, "iowait", 0.0) - getattr(t0, "iowait", 0.0))
            got = self.seconds.setdefault(label, [0.0, 0.0])
            got[0] += total - free
            got[1] += total

    def share(self, label: str) -> float:
        busy, total = self.seconds.get(label, [0.0, 0.0])
        return busy / total if total else float("nan")


async def fairness(gateway: str, questions: Questions, seconds: float
                   ) -> tuple[Searches, Searches, Searches]:
    """(B alone, B beside A, A): A at concurrency 32, B one search a second from 127.0.0.2."""
    b_conn = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    a_conn = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=b_conn) as b_http, \
            aiohttp.ClientSession(connector=a_conn) as a_http:

        async def b_client(out: Searches) -> None:
            t_end = time.perf_counter() + seconds
            while time.perf_counter() < t_end:
                t0 = time.perf_counter()
                await search(b_http, gateway, questions.next(), out)
                await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))

        alone = Searches()
        await b_client(alone)
        beside, a = Searches(), Searches()
        stop = asyncio.Event()
        a_tasks = [asyncio.create_task(searching(a_http, gateway, questions, 0.0, stop, a))
                   for _ in range(32)]
        await asyncio.sleep(2.0)
        await b_client(beside)
        stop.set()
        await asyncio.gather(*a_tasks)
    return alone, beside, a


async def warm_up(http: aiohttp.ClientSession, gateway: str, questions: Questions) -> None:
    """Every part has answered a few searches."""
    warm = Searches()
    for _ in range(20):
        await search(http, gateway, questions.next(), warm)


async def prepare(gateways: list[str], questions: Questions) -> None:
    """docs/examples' corpora ingested into each stack, and each stack warmed up."""
    async with aiohttp.ClientSession() as http:
        for gateway in gateways:
            for name in CORPORA:
                await cli(gateway, "ingest", str(ROOT / "docs" / "examples" / f"{name}.jsonl"),
                          "--corpus", name, "--quiet")
            await warm_up(http, gateway, questions)


async def lanes(session: aiohttp.ClientSession, gateway: str) -> dict[str, Any]:
    async with session.get(f"{gateway}/v1/embed/lanes") as r:
        out: dict[str, Any] = (await r.json())["models"][0]["lanes"]
        return out


async def main_async(args: argparse.Namespace, gateway: str, tmp: Path) -> None:
    data = Path(args.data)
    questions = Questions(data)
    think = args.think
    cut = args.limit or None  # a quick check of the script: a few documents per job
    n_reembed = min(REEMBED_DOCS, args.limit or REEMBED_DOCS)
    n_pages = min(WIKI_PAGES, args.limit or WIKI_PAGES)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as http:
        for name in CORPORA:
            await cli(gateway, "ingest", str(ROOT / "docs" / "examples" / f"{name}.jsonl"),
                      "--corpus", name, "--quiet")
        if args.fairness_only:
            await warm_up(http, gateway, questions)
            b_alone, b_beside, a = await fairness(gateway, questions, args.fair_seconds)
            print_fairness(args.fair_seconds, b_alone, b_beside, a)
            return
        runs = [(mode, r) for r in range(args.rounds) for mode in ("alone", "searched")]
        for mode, r in runs:
            docs = tagged_docs(data, ("cranfield",), f"re_{mode}_{r}")[:n_reembed]
            await load_unembedded(http, gateway, f"re_{mode}_{r}", docs)
        ingest_docs = {f"in_{mode}_{r}": write_jsonl(
            tmp / f"in_{mode}_{r}.jsonl",
            tagged_docs(data, ("cranfield", "cisi"), f"in_{mode}_{r}")[:cut]) for mode, r in runs}
        n_ingest = len(tagged_docs(data, ("cranfield", "cisi"), "x")[:cut])
        wikis = {f"wk_{mode}_{r}": write_wiki(tmp / f"wk_{mode}_{r}", data, f"wk_{mode}_{r}",
                                              n_pages) for mode, r in runs}
        await warm_up(http, gateway, questions)

        async def idle_job() -> float:
            await asyncio.sleep(args.idle_seconds)
            return 0.0

        def ingest(tag: str) -> Callable[[], Awaitable[float]]:
            return lambda: cli(gateway, "ingest", str(ingest_docs[tag]), "--corpus", tag,
                               "--quiet")

        def reembed(tag: str) -> Callable[[], Awaitable[float]]:
            return lambda: cli(gateway, "reembed", tag, "--model", MODEL, "--wait")

        def sync(tag: str) -> Callable[[], Awaitable[float]]:
            return lambda: cli(gateway, "sync", str(wikis[tag]), "--corpus", tag)

        jobs: dict[str, tuple[str, Callable[[str], Callable[[], Awaitable[float]]], int, bool]] = {
            # job -> (tag prefix, runner, documents, alone first in even rounds)
            "ingest": ("in", ingest, n_ingest, True),
            "reembed": ("re", reembed, n_reembed, False),
            "sync": ("wk", sync, n_pages, True)}
        jobs = {job: spec for job, spec in jobs.items() if job in args.jobs}
        busy = Busy()
        _, idle = await busy.measure("searches", while_searching(
            http, gateway, questions, think, idle_job))
        seconds: dict[tuple[str, str], list[float]] = {}
        during: dict[str, Searches] = {job: Searches() for job in jobs}
        for r in range(args.rounds):
            for job, (prefix, runner, _, alone_first) in jobs.items():
                modes = ("alone", "searched") if alone_first == (r % 2 == 0) else (
                    "searched", "alone")
                for mode in modes:
                    run = runner(f"{prefix}_{mode}_{r}")
                    if mode == "alone":
                        took = await busy.measure(f"{job} alone", run())
                    else:
                        took, got = await busy.measure(f"{job} searched", while_searching(
                            http, gateway, questions, think, run))
                        during[job].add(got)
                    seconds.setdefault((job, mode), []).append(took)
        _, idle_after = await busy.measure("searches", while_searching(
            http, gateway, questions, think, idle_job))
        idle.add(idle_after)
        idle_p95 = pct(idle.ms, 95)
        speeds = {job: (n / (sum(seconds[(job, "alone")]) / args.rounds),
                        n / (sum(seconds[(job, "searched")]) / args.rounds))
                  for job, (_, _, n, _) in jobs.items()}
        lane_stats = await lanes(http, gateway)

    b_alone, b_beside, a = await fairness(gateway, questions, args.fair_seconds)

    print(f"# bench_load: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores; default search over {', '.join(CORPORA)}; "
          f"2 searching clients, {think:g} s between a client's searches; each bulk job "
          f"{args.rounds}x alone and {args.rounds}x searched, alternating; idle before and after")
    print(f"{'searches':<34} {'n':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'p95/idle':>9}")
    print(row("idle", idle, idle_p95))
    labels = {"ingest": f"during ingest ({n_ingest} docs)",
              "reembed": f"during reembed ({n_reembed} docs)",
              "sync": f"during wiki sync ({n_pages} pages)"}
    for job in speeds:
        print(row(labels[job], during[job], idle_p95))
    print_stages([("idle", idle), *((labels[job], during[job]) for job in speeds)])
    print(f"{'bulk job':<34} {'alone/s':>8} {'searched/s':>11} {'ratio':>8}")
    for job, unit in (("ingest", "docs"), ("reembed", "docs"), ("sync", "pages")):
        if job not in speeds:
            continue
        alone_s, searched_s = speeds[job]
        print(f"{job + ' (' + unit + ')':<34} {alone_s:>8.2f} {searched_s:>11.2f} "
              f"{searched_s / alone_s:>7.2f}x")
    searches_busy = busy.share("searches")
    print(f"machine CPU busy: the searches alone {searches_busy:.0%}; "
          + "; ".join(f"{job} alone {busy.share(job + ' alone'):.0%}, searched "
                      f"{busy.share(job + ' searched'):.0%}, ceiling "
                      f"{min(1.0, (1 - searches_busy) / busy.share(job + ' alone')):.2f}x"
                      for job in speeds))
    print_fairness(args.fair_seconds, b_alone, b_beside, a)
    inter, bulk = lane_stats["interactive"], lane_stats["bulk"]
    print(f"embedd lanes: interactive {inter['texts']} texts, longest wait "
          f"{inter['wait_max_ms']:.1f} ms; bulk {bulk['texts']} texts, longest slice "
          f"{bulk['call_max_ms']:.1f} ms, longest wait {bulk['wait_max_ms']:.1f} ms")


def print_stages(phases: list[tuple[str, Searches]]) -> None:
    """Each phase's searches by stage (Searches.stages): p50 / p95 ms."""
    print(f"{'searches: p50 / p95 ms of':<34} {'embed':>13} {'vectord':>13} {'matrixd':>13} "
          f"{'outside':>13}")
    for label, s in phases:
        print(f"{label:<34} " + " ".join(f"{pct(xs, 50):>6.1f} /{pct(xs, 95):>5.1f}" for xs in
                                         ([st[i] for st in s.stages] for i in range(4))))


def print_fairness(seconds: float, b_alone: Searches, b_beside: Searches, a: Searches) -> None:
    b95 = pct(b_alone.ms, 95)
    print(f"fairness ({seconds:g} s each): B alone p50 {pct(b_alone.ms, 50):.1f} / "
          f"p95 {b95:.1f} ms; B beside A p50 {pct(b_beside.ms, 50):.1f} / "
          f"p95 {pct(b_beside.ms, 95):.1f} / max {max(b_beside.ms, default=float('nan')):.1f} ms "
          f"({pct(b_beside.ms, 95) / b95:.2f}x alone; B statuses {dict(b_beside.statuses)}); "
          f"A: {len(a.ms)} searches answered, statuses {dict(a.statuses)}")
