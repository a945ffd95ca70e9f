"""CPU per search of each process of two stacks: this checkout's and a baseline's.

Starts both stacks as scripts/bench_gateway.py --baseline --beir does (one corpus of
SciFact + Cranfield + CISI), caches every question's embedding, then sends the same
searches (`--mode`, SciFact's queries as text; with `--fresh` each round's questions new to
embedd, so the model embeds every one, then the same rounds again, every question cached:
what a search costs besides its question's model run) at `--concurrency` to each side in
turn, `--rounds` times, through the gateway or straight to matrixd (`--target`). Each
process's CPU time (user + system, from psutil) before and after, PostgreSQL's server
processes included, divided by the searches: which process costs more a search, whatever
else the machine runs (CPU per search is what bounds QPS on 2 cores).

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock .venv/bin/python \\
        scripts/bench_cpu_per_search.py --baseline ../main-before --beir ../shared/data
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import bench_gateway as bg
import psutil

DAEMONS = ("gateway", "matrixd", "embedd", "vectord", "syncd", "mcpd")
Snapshot = dict[int, tuple[str, float]]


def group_of(proc: psutil.Process) -> str:
    """The daemon a process is, `postgres`, or `other`."""
    cmd = " ".join(proc.cmdline())
    return next((d for d in DAEMONS if f"internal.{d}." in cmd),
                "postgres" if "postgres" in cmd else "other")


def processes(up: subprocess.Popen[str], data_dir: Path) -> list[psutil.Process]:
    """The daemons `lakehouse up` started and the PostgreSQL server of data_dir (it
    detaches from `up`), with its backends."""
    procs = psutil.Process(up.pid).children(recursive=True)
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "-D" in cmd and cmd[cmd.index("-D") + 1:][:1] == [str(data_dir)]:
            procs += [p, *p.children()]
    return procs


def snapshot(up: subprocess.Popen[str], data_dir: Path) -> Snapshot:
    out: Snapshot = {}
    for p in processes(up, data_dir):
        try:
            t = p.cpu_times()
            out[p.pid] = (group_of(p), t.user + t.system)
        except psutil.Error:
            pass  # a backend that ended
    return out


def spent(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a new process counts from 0)."""
    out: dict[str, float] = defaultdict(float)
    for pid, (group, cpu) in after.items():
        out[group] += cpu - (before[pid][1] if pid in before else 0.0)
    return out


def matrixd_url(up: subprocess.Popen[str]) -> str:
    for p in psutil.Process(up.pid).children():
        if group_of(p) == "matrixd":
            return "http://127.0.0.1:" + p.environ()["LAKEHOUSE_MATRIXD_PORT"]
    raise SystemExit("no matrixd")


async def measure(args: argparse.Namespace, sides: dict[str, tuple[subprocess.Popen[str], str, Path]]
                  ) -> None:
    texts: list[str | None] = list(bg.beir_queries(args.beir, args.queries))
    body: dict[str, object] = {"corpora": ["bench_beir3"], "k": 10}
    if args.mode != "default":
        body["mode"] = args.mode
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
        urls = {}
        for side, (up, gateway, _) in sides.items():
            await bg.load_beir(session, gateway, "bench_beir3", args.beir)
            urls[side] = gateway if args.target == "gateway" else matrixd_url(up)
            await bg.run_texts(session, urls[side], body, texts)  # every embedding cached
        # --fresh: a word naming the round after each question, so embedd's cache
        # answers none of them and every search embeds its question.
        fresh = await _rounds(session, sides, urls, body, texts, args.rounds, args.fresh)
        heading = ", every question new to embedd's cache" if args.fresh else ""
        _table(args, sides, fresh, len(texts), heading)
        if args.fresh:
            # The same questions again (each round's asked before): embedd's cache answers
            # them all, so the difference is the model's own run a question.
            cached = await _rounds(session, sides, urls, body, texts, args.rounds, True)
            _table(args, sides, cached, len(texts), ", the same questions again (embedd's "
                   "cache answers every one)")
            _floor(sides, fresh, cached)
    print(f"\n{bg.load_line()}")


Totals = tuple[dict[str, dict[str, float]], dict[str, int], dict[str, float]]


async def _rounds(session: aiohttp.ClientSession,
                  sides: dict[str, tuple[subprocess.Popen[str], str, Path]], urls: dict[str, str],
                  body: dict[str, object], texts: list[str | None], rounds: int,
                  suffixed: bool) -> Totals:
    """CPU seconds per group, searches and wall seconds per side, `rounds` rounds of the
    texts (suffixed: each round's own word after each question), sides alternating."""
    total: dict[str, dict[str, float]] = {side: defaultdict(float) for side in sides}
    done = dict.fromkeys(sides, 0)
    wall = dict.fromkeys(sides, 0.0)
    for rnd in range(rounds):
        asked = [f"{t} r{rnd}" for t in texts if t] if suffixed else texts
        for side in (list(sides) if rnd % 2 == 0 else list(sides)[::-1]):
            up, _, data_dir = sides[side]
            before = snapshot(up, data_dir)
            got, secs = await bg.run_texts(session, urls[side], body, list(asked))
            for group, cpu in spent(before, snapshot(up, data_dir)).items():
                total[side][group] += cpu
            done[side] += len(got)
            wall[side] += secs
    return total, done, wall


def _per(totals: Totals, side: str, group: str) -> float:
    """CPU ms a search of group (`all`: every group) on side."""
    total, done, _ = totals
    cpu = sum(total[side].values()) if group == "all" else total[side][group]
    return cpu * 1000 / done[side]


def _table(args: argparse.Namespace, sides: Mapping[str, object], totals: Totals, n: int,
           heading: str) -> None:
    total, done, wall = totals
    print(f"\n{args.mode} searches to the {args.target}, concurrency {bg.CONCURRENCY}, "
          f"{args.rounds} x {n} a side, sides alternating{heading}; CPU ms per search\n")
    print("| process | " + " | ".join(sides) + " | ratio |")
    print("|---|" + "---:|" * (len(sides) + 1))
    groups = sorted({g for t in total.values() for g in t} - {"syncd", "mcpd", "other"})
    this, base = sides
    for group in [*groups, "all"]:
        per = {s: _per(totals, s, group) for s in sides}
        print(f"| {group} | " + " | ".join(f"{per[s]:.3f}" for s in sides)
              + f" | {per[this] / per[base]:.2f}x |")
    qps = {s: done[s] / wall[s] for s in sides}
    print("| QPS | " + " | ".join(f"{qps[s]:.0f}" for s in sides)
          + f" | {qps[this] / qps[base]:.2f}x |")


def _floor(sides: Mapping[str, object], fresh: Totals, cached: Totals) -> None:
    """What a search costs besides its question's model run, and what that leaves the
    model under 0.6x the baseline's CPU a search."""
    this, base = sides
    model = _per(fresh, this, "embedd") - _per(cached, this, "embedd")
    rest = _per(fresh, this, "all") - model
    budget = 0.6 * _per(fresh, base, "all")
    print(f"\nthis side, a search besides its question's model run: {rest:.3f} ms "
          f"(fresh all - the model's run); the model's run a question: {model:.3f} ms "
          f"(embedd fresh - cached); 0.6x the baseline's fresh search: {budget:.3f} ms, "
          f"which leaves the model {budget - rest:.3f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--beir", type=Path, required=True, metavar="DATA")
    parser.add_argument("--mode", default="vector", help="vector, or default (hybrid)")
    parser.add_argument("--target", choices=("gateway", "matrixd"), default="gateway")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--queries", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--fresh", action="store_true",
                        help="questions embedd has not seen (the model runs for each search); "
                             "then the same rounds again with embedd's cache answering them "
                             "(the model's own run a question, and what the rest costs)")

    args = parser.parse_args()
    bg.CONCURRENCY = args.concurrency
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-cpu-"))
    sides: dict[str, tuple[subprocess.Popen[str], str, Path]] = {}
    try:
        for side, root in (("this", bg.ROOT), ("baseline", args.baseline.resolve())):
            up, urls = bg.start_stack(tmp / side, root)
            sides[side] = (up, urls["gateway"], tmp / side / "pg")
        asyncio.run(measure(args, sides))
    finally:
        for up, _, _ in reversed(sides.values()):
            up.send_signal(signal.SIGTERM)
            up.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
