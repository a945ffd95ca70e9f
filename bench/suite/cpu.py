"""CPU per search of each process of two stacks: this checkout's and a baseline's.

Both stacks hold one corpus of SciFact + Cranfield + CISI (bench/data/beir.py); every
question's embedding is cached first, then the same searches (--mode, SciFact's queries as
text; with --fresh each round's questions new to embedd, so the model embeds every one,
then the same rounds again, every question cached: what a search costs besides its
question's model run) at --concurrency to each side in turn, --rounds times, through the
gateway or straight to matrixd (--target). Each process's CPU (user + system) before and
after, PostgreSQL's server processes included, divided by the searches: which process
costs more a search, whatever else the machine runs (CPU per search bounds QPS here).
"""

from __future__ import annotations

from collections import defaultdict

import aiohttp
import psutil

from bench.data import beir
from bench.harness import Run
from bench.harness.http import search, session
from bench.harness.stacks import Stack
from bench.harness.timing import alternated, closed_loop, cpu_seconds, spent

OPTIONS = {"mode": ("vector", "vector, or default (hybrid)"), "target": ("gateway", "or matrixd"),
           "concurrency": 16, "queries": 800, "rounds": 4,
           "fresh": (False, "questions embedd has not seen, then the same again cached")}
QUICK = {"queries": 100, "rounds": 2}
DAEMONS = ("gateway", "matrixd", "embedd", "vectord", "syncd", "mcpd")
Totals = tuple[dict[str, dict[str, float]], dict[str, int], dict[str, float]]


def group_of(proc: psutil.Process) -> str:
    """The daemon a process is, `postgres`, or `other`."""
    cmd = " ".join(proc.cmdline())
    return next((d for d in DAEMONS if f"internal.{d}." in cmd),
                "postgres" if "postgres" in cmd else "other")


async def rounds(run: Run, http: aiohttp.ClientSession, stacks: dict[str, Stack], urls: dict[str, str],
                 body: dict[str, object], texts: list[str], suffixed: bool) -> Totals:
    """CPU seconds per group, searches and wall seconds per side, sides alternating."""
    total: dict[str, dict[str, float]] = {side: defaultdict(float) for side in stacks}
    done, wall = dict.fromkeys(stacks, 0), dict.fromkeys(stacks, 0.0)
    for rnd in range(run.args.rounds):
        asked = [f"{t} r{rnd}" for t in texts] if suffixed else texts
        for side in alternated(list(stacks), rnd):
            before = cpu_seconds(stacks[side].processes(), group_of)
            got, secs = await closed_loop(
                lambda t, s=side: search(http, urls[s], {**body, "query_text": t}),
                asked, run.args.concurrency)
            for group, cpu in spent(before, cpu_seconds(stacks[side].processes(), group_of)).items():
                total[side][group] += cpu
            done[side] += len(got)
            wall[side] += secs
    return total, done, wall


def per(totals: Totals, side: str, group: str) -> float:
    """CPU ms a search of group (`all`: every group) on side."""
    total, done, _ = totals
    return (sum(total[side].values()) if group == "all" else total[side][group]) * 1000 / done[side]


def show(run: Run, totals: Totals, n: int, heading: str) -> None:
    total, done, wall = totals
    this, base = list(total)
    groups = sorted({g for t in total.values() for g in t} - {"syncd", "mcpd", "other"})
    rows = [(g, per(totals, this, g), per(totals, base, g),
             per(totals, this, g) / per(totals, base, g)) for g in [*groups, "all"]]
    q = {s: done[s] / wall[s] for s in total}
    rows.append(("QPS", q[this], q[base], q[this] / q[base]))
    run.table(f"{run.args.mode} searches to the {run.args.target}, concurrency "
              f"{run.args.concurrency}, {run.args.rounds} x {n} a side, sides alternating"
              f"{heading}; CPU ms per search", ["process", f"{this}:.3f", f"{base}:.3f", "ratio:.2f"],
              rows)


async def main(run: Run) -> None:
    a = run.args
    if run.baseline is None:
        raise SystemExit("cpu compares two checkouts: give --baseline DIR")
    body: dict[str, object] = {"corpora": ["bench_beir3"], "k": 10}
    if a.mode != "default":
        body["mode"] = a.mode
    with run.sides() as stacks:
        async with session(64) as http:
            texts = beir.queries(run.data, a.queries)
            urls = {}
            for side, s in stacks.items():
                await beir.into(http, s.gateway, "bench_beir3", beir.documents(run.data))
                urls[side] = s.gateway if a.target == "gateway" else s.url("matrixd")
                await closed_loop(lambda t, u=urls[side]: search(http, u, {**body, "query_text": t}),
                                  texts, a.concurrency)  # every embedding cached
            fresh = await rounds(run, http, stacks, urls, body, texts, a.fresh)
            show(run, fresh, len(texts), ", every question new to embedd's cache" if a.fresh else "")
            if a.fresh:
                cached = await rounds(run, http, stacks, urls, body, texts, True)
                show(run, cached, len(texts), ", the same questions again (embedd's cache "
                     "answers every one)")
                model = per(fresh, "this", "embedd") - per(cached, "this", "embedd")
                rest = per(fresh, "this", "all") - model
                budget = 0.6 * per(fresh, "baseline", "all")
                run.say(f"this side, a search besides its question's model run: {rest:.3f} ms; "
                        f"the model's run a question: {model:.3f} ms; 0.6x the baseline's fresh "
                        f"search: {budget:.3f} ms, which leaves the model {budget - rest:.3f} ms")
