"""bench_load's configurations compared in one run (`scripts/bench_load.py --config
NAME:VAR=VALUE,... --config ...`): a stack for each configuration, all up at once, measured
in turn so that the machine's other load falls on each alike.

- With `--fairness-only`: the fairness case on every stack in turn (`compare_configs`).
- Without it: the bulk jobs' searches (`compare_bulk`): each round, on every stack in turn
  (each round starting one stack later), the two searching clients idle for
  `--idle-seconds`, then each job of `--jobs` alone and then under the searches (reembed
  and sync as bench_load runs them; texts of their own each run). Per configuration: the
  searches' p50 / p95 idle and during each job, p95 against its own idle, the jobs'
  documents/s alone and searched, and the searches by stage.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock .venv/bin/python \\
        scripts/bench_load.py --jobs ingest --rounds 2 --idle-seconds 20 \\
        --config main:LAKEHOUSE_VECTORD_LANGUAGE_WORKER=false --config worker:
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from bench_load_core import (
    CORPORA,
    REEMBED_DOCS,
    WIKI_PAGES,
    Questions,
    Searches,
    cli,
    fairness,
    load_unembedded,
    pct,
    prepare,
    print_fairness,
    print_stages,
    row,
    tagged_docs,
    while_searching,
    write_jsonl,
    write_wiki,
)
from bench_stacks import config_stacks, parse_config

R = TypeVar("R")


def _on_configs(args: argparse.Namespace, tmp: Path, heading: str,
                run: Callable[[argparse.Namespace, list[str]], Coroutine[Any, Any, list[R]]]
                ) -> tuple[list[tuple[str, dict[str, str]]], list[R]]:
    """A stack per --config, all up for run(args, gateways) (after the heading, its
    `{when}` the time now): the configurations and what run gives for each."""
    configs = [parse_config(c) for c in args.config]
    print("# bench_load " + heading.format(when=time.strftime("%Y-%m-%d %H:%M UTC",
                                                              time.gmtime())))
    with contextlib.ExitStack() as stacks:
        gateways = config_stacks(stacks, configs, tmp)
        return configs, asyncio.run(run(args, gateways))


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
    configs, results = _on_configs(
        args, tmp, f"--fairness-only: {{when}}, {os.cpu_count()} cores; {len(args.config)} "
        f"configurations, a stack each, all up at once; {args.fair_rounds} rounds, each: every "
        f"stack in turn, B alone {args.fair_seconds:g} s then B beside A {args.fair_seconds:g} "
        f"s (A at concurrency 32, B one search a second)", interleaved)
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


Job = Callable[[], Awaitable[float]]


async def _bulk_jobs(args: argparse.Namespace, gateway: str, tmp: Path, tag: str,
                     http: aiohttp.ClientSession) -> dict[str, tuple[int, Job]]:
    """Each job of --jobs on this stack with data of its own (tag): (documents, runner)."""
    data = Path(args.data)
    cut = args.limit or None
    jobs: dict[str, tuple[int, Job]] = {}
    if "ingest" in args.jobs:
        docs = tagged_docs(data, ("cranfield", "cisi"), tag)[:cut]
        path = write_jsonl(tmp / f"{tag}.jsonl", docs)
        jobs["ingest"] = (len(docs), lambda: cli(gateway, "ingest", str(path), "--corpus",
                                                 tag, "--quiet"))
    if "reembed" in args.jobs:
        docs = tagged_docs(data, ("cranfield",), f"re{tag}")[:min(REEMBED_DOCS, cut or REEMBED_DOCS)]
        await load_unembedded(http, gateway, f"re{tag}", docs)
        jobs["reembed"] = (len(docs), lambda: cli(gateway, "reembed", f"re{tag}", "--model",
                                                  "local", "--wait"))
    if "sync" in args.jobs:
        pages = min(WIKI_PAGES, cut or WIKI_PAGES)
        folder = write_wiki(tmp / f"wk{tag}", data, f"wk{tag}", pages)
        jobs["sync"] = (pages, lambda: cli(gateway, "sync", str(folder), "--corpus", f"wk{tag}"))
    return jobs


async def _bulk_rounds(args: argparse.Namespace, gateways: list[str], tmp: Path
                       ) -> list[tuple[Searches, dict[str, Searches], dict[str, list[float]]]]:
    """Per stack: the idle searches, the searches during each job, and each job's
    documents/s (alone, searched), the rounds merged."""
    questions = Questions(Path(args.data))
    await prepare(gateways, questions)
    out: list[tuple[Searches, dict[str, Searches], dict[str, list[float]]]] = [
        (Searches(), {}, {}) for _ in gateways]

    async def idle_job() -> float:
        await asyncio.sleep(args.idle_seconds)
        return 0.0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as http:
        for r in range(args.rounds):
            for k in range(len(gateways)):
                i = (k + r) % len(gateways)
                idle, during, speeds = out[i]
                _, got = await while_searching(http, gateways[i], questions, args.think, idle_job)
                idle.add(got)
                alone = await _bulk_jobs(args, gateways[i], tmp, f"c{i}r{r}a", http)
                searched = await _bulk_jobs(args, gateways[i], tmp, f"c{i}r{r}s", http)
                for job, (n, run) in alone.items():
                    speeds.setdefault(f"{job} alone", []).append(n / await run())
                    n, run = searched[job]
                    took, got = await while_searching(http, gateways[i], questions,
                                                      args.think, run)
                    during.setdefault(job, Searches()).add(got)
                    speeds.setdefault(f"{job} searched", []).append(n / took)
    return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def compare_bulk(args: argparse.Namespace, tmp: Path) -> None:
    """The bulk jobs' searches for every --config, each on a stack of its own (`_bulk_rounds`)."""
    configs, results = _on_configs(
        args, tmp, f"--config: {{when}}, {os.cpu_count()} cores; default search over "
        f"{', '.join(CORPORA)}; {len(args.config)} configurations, a stack each, all up at "
        f"once; {args.rounds} rounds, each: every stack in turn, idle searches "
        f"{args.idle_seconds:g} s, then each of {', '.join(args.jobs)} alone and under the "
        f"searches (2 clients, {args.think:g} s between a client's searches)",
        lambda a, gateways: _bulk_rounds(a, gateways, tmp))
    print(f"{'configuration, searches':<34} {'n':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} "
          f"{'p95/idle':>9}")
    for (name, _), (idle, during, _) in zip(configs, results, strict=True):
        print(row(f"{name}: idle", idle, pct(idle.ms, 95)))
        for job, got in during.items():
            print(row(f"{name}: during {job}", got, pct(idle.ms, 95)))
    print(f"{'configuration, bulk job':<34} {'alone/s':>8} {'searched/s':>11}")
    for (name, _), (_, _, speeds) in zip(configs, results, strict=True):
        for job in args.jobs:
            alone = speeds.get(f"{job} alone", [])
            searched = speeds.get(f"{job} searched", [])
            print(f"{name + ': ' + job:<34} {_mean(alone):>8.2f} {_mean(searched):>11.2f}")
    for (name, _), (idle, during, _) in zip(configs, results, strict=True):
        print(f"== {name}")
        print_stages([("idle", idle), *((f"during {job}", s) for job, s in during.items())])
