"""Searches while others load data: the default search's p95 idle and during a bulk
ingest, a reembed and a wiki sync, each job's speed alone and searched, and fairness.

A stack with docs/examples' two corpora; the default search over them (hybrid, as shipped)
from two searching clients, each asking a question, waiting --think seconds and asking the
next (BEIR queries, never twice the same text): idle; during `lakehouse ingest` of
Cranfield + CISI (2,858 documents, embedded); during `lakehouse reembed` of a 1,400-document
corpus (random vectors, then embedded by the local model); during `lakehouse sync` of 500
generated pages. Each job runs --rounds times alone and as often under the searches,
alternating which comes first, each run on texts of its own: documents/s alone and
searched. Idle before and after the jobs; each phase's searches by stage; the machine's
CPU busy share per phase and each job's ceiling under the searches, min(1, (1 - S) / B).
Then fairness: client A at concurrency 32, client B (127.0.0.2) one question a second; B's
p95 against B alone. --fairness-only runs that alone; --config NAME:VAR=VALUE,...
(repeatable) runs it, or the bulk jobs' searches, on a stack per configuration, all up at
once, measured in turn round by round.

Targets (docs/decisions/0110-embedding-lanes.md): p95 during each bulk job <= 2x idle p95; bulk
documents/s under searches >= 0.85x alone; B's p95 <= 2x B alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import psutil

from bench.data import texts
from bench.harness import Run
from bench.harness.clients import (
    CORPORA,
    ROW,
    STAGE_ROW,
    Questions,
    Searches,
    prepare,
    search,
    searching,
    while_searching,
)
from bench.harness.stacks import cli, parse_config
from bench.harness.timing import pct

OPTIONS = {"think": (0.1, "seconds a searching client waits between its searches"),
           "idle_seconds": 30.0, "jobs": ("ingest,reembed,sync", "the bulk jobs, comma-separated"),
           "rounds": 2, "fair_seconds": 40.0, "fair_rounds": 3, "fairness_only": False,
           "limit": (0, "at most this many documents a job (0: all)"),
           "config": ([], "NAME:VAR=VALUE,... a stack of its own (repeatable)")}
QUICK = {"idle_seconds": 5.0, "rounds": 1, "fair_seconds": 5.0, "fair_rounds": 1, "limit": 200}
T = TypeVar("T")
Job = Callable[[], Awaitable[float]]


class Busy:
    """The machine's CPU busy share over phases (every process: a quiet machine makes it
    the stack's): per label, busy and total CPU seconds."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    async def measure(self, label: str, work: Awaitable[T]) -> T:
        t0 = psutil.cpu_times()
        try:
            return await work
        finally:
            t1 = psutil.cpu_times()
            free = (t1.idle - t0.idle) + (getattr(t1, "iowait", 0.0) - getattr(t0, "iowait", 0.0))
            got = self.seconds.setdefault(label, [0.0, 0.0])
            got[0] += sum(t1) - sum(t0) - free
            got[1] += sum(t1) - sum(t0)

    def share(self, label: str) -> float:
        busy, total = self.seconds.get(label, [0.0, 0.0])
        return busy / total if total else float("nan")


async def fairness(gateway: str, questions: Questions, seconds: float
                   ) -> tuple[Searches, Searches, Searches]:
    """(B alone, B beside A, A): A at concurrency 32, B one search a second from 127.0.0.2."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            local_addr=("127.0.0.2", 0))) as b_http, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as a_http:
        async def b_client(out: Searches) -> None:
            t_end = time.perf_counter() + seconds
            while time.perf_counter() < t_end:
                t0 = time.perf_counter()
                await search(b_http, gateway, questions.next(), CORPORA, out)
                await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))

        alone, beside, a = Searches(), Searches(), Searches()
        await b_client(alone)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(searching(a_http, gateway, questions, CORPORA, 0.0, stop, a))
                 for _ in range(32)]
        await asyncio.sleep(2.0)
        await b_client(beside)
        stop.set()
        await asyncio.gather(*tasks)
    return alone, beside, a


def fairness_rows(name: str, got: tuple[Searches, Searches, Searches], pooled: float
                  ) -> tuple[Any, ...]:
    alone, beside, a = got
    b95 = pct(beside.ms, 95)
    return (name, pct(alone.ms, 95), pct(beside.ms, 50), b95, max(beside.ms, default=float("nan")),
            b95 / pct(alone.ms, 95), b95 / pooled, len(a.ms), dict(beside.statuses))


FAIR = ["configuration", "B alone p95:.1f", "B beside A p50:.1f", "p95:.1f", "max:.1f",
        "/ alone:.2f", "/ pooled:.2f", "A answered:d", "B statuses"]


async def jobs_on(run: Run, gateway: str, tag: str, http: aiohttp.ClientSession
                  ) -> dict[str, tuple[int, Job]]:
    """Each job of --jobs on this stack with data of its own (tag): (documents, runner)."""
    a, cut = run.args, run.args.limit or None
    out: dict[str, tuple[int, Job]] = {}
    if "ingest" in a.jobs:
        docs = texts.tagged_docs(run.data, ("cranfield", "cisi"), tag)[:cut]
        path = texts.write_jsonl(run.folder / f"{tag}.jsonl", docs)
        out["ingest"] = (len(docs), lambda: cli(gateway, "ingest", str(path), "--corpus", tag,
                                                "--quiet"))
    if "reembed" in a.jobs:
        docs = texts.tagged_docs(run.data, ("cranfield",), f"re{tag}")[:min(1400, cut or 1400)]
        await texts.unembedded(http, gateway, f"re{tag}", docs)
        out["reembed"] = (len(docs), lambda: cli(gateway, "reembed", f"re{tag}", "--model",
                                                 "local", "--wait"))
    if "sync" in a.jobs:
        pages = min(500, cut or 500)
        folder = texts.write_wiki(run.folder / f"wk{tag}", run.data, f"wk{tag}", pages)
        out["sync"] = (pages, lambda: cli(gateway, "sync", str(folder), "--corpus", f"wk{tag}"))
    return out


async def bulk(run: Run, gateways: list[str], questions: Questions, busy: Busy
               ) -> list[tuple[Searches, dict[str, Searches], dict[str, list[float]]]]:
    """Per stack: idle searches, the searches during each job, each job's documents/s
    alone and searched; rounds over the stacks in turn (each round one stack later)."""
    a = run.args
    out = [(Searches(), {}, {}) for _ in gateways]  # type: ignore[var-annotated]

    async def idle() -> float:
        await asyncio.sleep(a.idle_seconds)
        return 0.0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as http:
        for r in range(a.rounds):
            for k in range(len(gateways)):
                i = (k + r) % len(gateways)
                gw, (idle_s, during, speeds) = gateways[i], out[i]
                if len(gateways) > 1 or r == 0:  # one stack: idle before and after the jobs
                    idle_s.add((await busy.measure("searches", while_searching(
                        http, gw, questions, CORPORA, a.think, idle)))[1])
                alone = await jobs_on(run, gw, f"c{i}r{r}a", http)
                searched = await jobs_on(run, gw, f"c{i}r{r}s", http)
                for job in alone:  # ingest and sync alone first in even rounds, reembed not
                    order = ["alone", "searched"] if (job != "reembed") == (r % 2 == 0) else [
                        "searched", "alone"]
                    for mode in order:
                        n, go = (alone if mode == "alone" else searched)[job]
                        if mode == "alone":
                            took = await busy.measure(f"{job} alone", go())
                        else:
                            t0 = time.perf_counter()
                            took, got = await busy.measure(f"{job} searched", while_searching(
                                http, gw, questions, CORPORA, a.think, go))
                            during.setdefault(job, Searches()).add(got)
                            if r == 0 and i == 0:  # the plots: p95 over time during the job
                                run.series(f"p95 during {job}", got.over_time(t0, 5.0))
                                run.series("p95 idle", [[0.0, pct(idle_s.ms, 95)],
                                                        [round(took, 1), pct(idle_s.ms, 95)]])
                        speeds.setdefault(f"{job} {mode}", []).append(n / took)
                if r == a.rounds - 1 and len(gateways) == 1:
                    idle_s.add((await busy.measure("searches", while_searching(
                        http, gw, questions, CORPORA, a.think, idle)))[1])
    return out


def report_bulk(run: Run, names: list[str], got: list[Any], busy: Busy) -> None:
    rows, stages, speeds = [], [], []
    for name, (idle, during, speed) in zip(names, got, strict=True):
        pre = f"{name}: " if len(names) > 1 else ""
        idle95 = pct(idle.ms, 95)
        rows.append(idle.row(f"{pre}idle", idle95))
        stages.append(idle.stage_row(f"{pre}idle"))
        for job, s in during.items():
            rows.append(s.row(f"{pre}during {job}", idle95))
            stages.append(s.stage_row(f"{pre}during {job}"))
            alone, searched = (sum(speed[f"{job} {m}"]) / len(speed[f"{job} {m}"])
                               for m in ("alone", "searched"))
            speeds.append((f"{pre}{job}", alone, searched, searched / alone))
    a = run.args
    run.table(f"default search over {', '.join(CORPORA)}; 2 searching clients, {a.think:g} s "
              f"between a client's searches; each bulk job {a.rounds}x alone and {a.rounds}x "
              "searched, alternating; idle before and after", ROW, rows)
    run.table("the searches by stage", STAGE_ROW, stages)
    run.table("bulk jobs, documents (pages) a second", ["bulk job", "alone/s:.2f",
              "searched/s:.2f", "ratio:.2f"], speeds)
    if len(names) == 1:
        s = busy.share("searches")
        run.say("machine CPU busy: the searches alone " + f"{s:.0%}; " + "; ".join(
            f"{job} alone {busy.share(job + ' alone'):.0%}, searched "
            f"{busy.share(job + ' searched'):.0%}, ceiling "
            f"{min(1.0, (1 - s) / busy.share(job + ' alone')):.2f}x" for job in got[0][1]))


async def measure(run: Run, gateways: list[str], names: list[str]) -> None:
    a = run.args
    a.jobs = [j for j in str(a.jobs).split(",") if j]
    questions = Questions(run.data)
    for gw in gateways:
        await prepare(run.root, gw, questions)
    busy = Busy()
    if not a.fairness_only:
        report_bulk(run, names, await bulk(run, gateways, questions, busy), busy)
        if len(gateways) > 1:
            return
    merged = [(Searches(), Searches(), Searches()) for _ in gateways]
    for r in range(a.fair_rounds if len(gateways) > 1 else 1):
        for k in range(len(gateways)):
            i = (k + r) % len(gateways)
            for into, part in zip(merged[i], await fairness(gateways[i], questions,
                                                             a.fair_seconds), strict=True):
                into.add(part)
    pooled = pct([ms for alone, _, _ in merged for ms in alone.ms], 95)
    run.table(f"fairness: A at concurrency 32, B one search a second; {a.fair_seconds:g} s each"
              f"{f', {a.fair_rounds} rounds' if len(gateways) > 1 else ''}; ms", FAIR,
              [fairness_rows(n, m, pooled) for n, m in zip(names, merged, strict=True)])


async def main(run: Run) -> None:
    configs = [parse_config(c) for c in run.args.config] or [("defaults", {})]
    with contextlib.ExitStack() as held:
        stacks = [held.enter_context(run.stack(env, tag=f"stack{i}"))
                  for i, (_, env) in enumerate(configs)]
        await measure(run, [s.gateway for s in stacks], [n for n, _ in configs])

