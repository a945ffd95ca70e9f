"""Searches while bulk work runs: the stack of the README, shared by searchers and loaders.

Starts the whole stack with `lakehouse up` (scripts/bench_gateway.py's start_stack: free
loopback ports, a temporary data directory), ingests docs/examples' two corpora, then
measures the default search over them (hybrid, as shipped; `corpora: [handbook, tickets]`)
from two searching clients, each asking a question, waiting `--think` seconds and asking
the next (questions from the BEIR sets' queries, never twice the same text):

- idle;
- during a bulk `lakehouse ingest` of Cranfield + CISI (2,858 documents, embedded);
- during `lakehouse reembed` of a 1,400-document corpus (Cranfield, loaded with random
  vectors and no model, then embedded by the local model);
- during `lakehouse sync` of a folder of 500 generated markdown pages.

Each bulk job runs `--rounds` times alone and as often under the searches, alternating
which comes first (ingest and sync alone first in even rounds, reembed searched first),
each run on texts of its own (a run tag in every text, so embedd's cache serves no run
from another): documents/s alone and under searches, from the total times. Idle is
measured before and after the bulk jobs.
Then fairness: client A runs the default search at concurrency 32, client B (another
loopback address, 127.0.0.2) asks one question a second; B's p95 against B alone.
`--fairness-only` runs that case alone; with `--config NAME:VAR=VALUE,...` (repeatable)
once per configuration, each on a stack of its own started with those variables set, all
stacks up at once and measured in turn for `--fair-rounds` rounds (a machine shared with
other work loads each configuration alike), then a table of them all (B's p95 against its
own alone and against all the configurations' B alone pooled).

It also prints the machine's CPU busy share in each phase (all processes: meaningful on
an otherwise quiet machine) and each bulk job's ceiling under the searches: a CPU-bound
job that yields the CPU to the searches (embedd's bulk threads run at nice +10) keeps at
most what the searches leave, 1 - S of the machine, against the B it takes alone:
min(1, (1 - S) / B) of its speed alone.

Targets (DECISIONS.md, "Embedding: lanes"): p95 during each bulk job <= 2x idle p95; bulk
documents/s under searches >= 0.85x alone; B's p95 <= 2x B alone.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_load.py [--data ../shared/data] [--think 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import tempfile
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
from bench_stacks import config_stacks, parse_config, running_stack  # noqa: E402

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
        await resp.read()
        out.statuses[resp.status] += 1
    if resp.status == 200:
        out.ms.append((time.perf_counter() - t0) * 1000)


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


async def interleaved(args: argparse.Namespace, gateways: list[str]
                      ) -> list[tuple[Searches, Searches, Searches]]:
    """`fairness` on every stack in turn, `--fair-rounds` times (each round starting one
    stack later), so each configuration meets the machine's other load alike: per stack
    (B alone, B beside A, A), the rounds merged."""
    questions = Questions(Path(args.data))
    await prepare(gateways, questions)
    merged = [(Searches(), Searches(), Searches()) for _ in gateways]
    for r in range(args.fair_rounds):
        for k in range(len(gateways)):
            i = (k + r) % len(gateways)
            got = await fairness(gateways[i], questions, args.fair_seconds)
            for into, part in zip(merged[i], got, strict=True):
                into.ms += part.ms
                into.statuses.update(part.statuses)
    return merged


def compare_configs(args: argparse.Namespace, tmp: Path) -> None:
    """The fairness case for every --config, each on a stack of its own, all in this run,
    interleaved (`interleaved`)."""
    configs = [parse_config(c) for c in args.config]
    print(f"# bench_load --fairness-only: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores; {len(configs)} configurations, a stack each, all up at "
          f"once; {args.fair_rounds} rounds, each: every stack in turn, B alone "
          f"{args.fair_seconds:g} s then B beside A {args.fair_seconds:g} s (A at "
          f"concurrency 32, B one search a second)")
    with contextlib.ExitStack() as stacks:
        gateways = config_stacks(stacks, configs, tmp)
        results = asyncio.run(interleaved(args, gateways))
    total = args.fair_rounds * args.fair_seconds
    for (name, _), (b_alone, b_beside, a) in zip(configs, results, strict=True):
        print(f"== {name}")
        print_fairness(total, b_alone, b_beside, a)
    pooled = [ms for b_alone, _, _ in results for ms in b_alone.ms]
    p95 = pct(pooled, 95)
    print(f"B alone, all configurations pooled: n {len(pooled)}, p50 {pct(pooled, 50):.1f} "
          f"/ p95 {p95:.1f} ms")
    print(f"{'configuration':<34} {'alone p95':>9} {'beside p50':>10} {'p95':>7} {'max':>7} "
          f"{'/alone':>7} {'/pooled':>8} {'A answered':>10}")
    for (name, _), (b_alone, b_beside, a) in zip(configs, results, strict=True):
        b95 = pct(b_beside.ms, 95)
        print(f"{name:<34} {pct(b_alone.ms, 95):>9.1f} {pct(b_beside.ms, 50):>10.1f} "
              f"{b95:>7.1f} {max(b_beside.ms, default=float('nan')):>7.1f} "
              f"{b95 / pct(b_alone.ms, 95):>6.2f}x {b95 / p95:>7.2f}x {len(a.ms):>10}")


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
                        during[job].ms += got.ms
                        during[job].statuses.update(got.statuses)
                    seconds.setdefault((job, mode), []).append(took)
        _, idle_after = await busy.measure("searches", while_searching(
            http, gateway, questions, think, idle_job))
        idle.ms += idle_after.ms
        idle.statuses.update(idle_after.statuses)
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


def print_fairness(seconds: float, b_alone: Searches, b_beside: Searches, a: Searches) -> None:
    b95 = pct(b_alone.ms, 95)
    print(f"fairness ({seconds:g} s each): B alone p50 {pct(b_alone.ms, 50):.1f} / "
          f"p95 {b95:.1f} ms; B beside A p50 {pct(b_beside.ms, 50):.1f} / "
          f"p95 {pct(b_beside.ms, 95):.1f} / max {max(b_beside.ms, default=float('nan')):.1f} ms "
          f"({pct(b_beside.ms, 95) / b95:.2f}x alone; B statuses {dict(b_beside.statuses)}); "
          f"A: {len(a.ms)} searches answered, statuses {dict(a.statuses)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get(
        "LAKEHOUSE_DATA", str(ROOT.parent / "shared")) + "/data")
    parser.add_argument("--think", type=float, default=0.1,
                        help="seconds a searching client waits between its searches")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--jobs", type=lambda v: v.split(","), default=["ingest", "reembed", "sync"],
                        help="the bulk jobs to measure, comma-separated (ingest,reembed,sync)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each bulk job alone and under searches (alternating)")
    parser.add_argument("--fair-seconds", type=float, default=40.0,
                        help="B alone, then B beside A, this long each (with --config: "
                        "per round)")
    parser.add_argument("--fair-rounds", type=int, default=3,
                        help="with --config: rounds over the configurations")
    parser.add_argument("--fairness-only", action="store_true",
                        help="only the fairness case (the example corpora, no bulk jobs)")
    parser.add_argument("--limit", type=int, default=0,
                        help="at most this many documents per bulk job (0: all; a quick check)")
    parser.add_argument("--config", action="append", default=[],
                        metavar="NAME:VAR=VALUE,...",
                        help="with --fairness-only: one configuration (a stack of its own "
                        "with these variables set); repeatable")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-load-"))
    if args.config:
        if not args.fairness_only:
            parser.error("--config needs --fairness-only")
        compare_configs(args, tmp)
        return 0
    with running_stack(tmp / "stack") as gateway:
        asyncio.run(main_async(args, gateway, tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
