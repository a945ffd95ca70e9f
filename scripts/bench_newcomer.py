"""A client's first search beside a busy client that had the gateway to itself.

scripts/bench_load.py's fairness case starts the busy client A while the light client B
is in the share window, so A is held to its share from its first search. This is the
other order: A (the default search at concurrency 32) runs alone for longer than
`share_seconds`, holding every search place a lone client may have (`alone_in_flight`),
then B (127.0.0.2) asks once, a newcomer, and then once a second beside A. Per
configuration (`--config NAME:VAR=VALUE,...`, repeatable, a stack each, all up at once,
measured in turn each round): B alone, B's first search beside A and B's next ones.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock .venv/bin/python \\
        scripts/bench_newcomer.py --config "NAME:LAKEHOUSE_GATEWAY_ALONE_IN_FLIGHT=1" ...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from pathlib import Path

import aiohttp
from bench_load_core import ROOT, Questions, Searches, pct, prepare, search, searching
from bench_stacks import config_stacks, parse_config


async def newcomer(gateway: str, questions: Questions, alone_for: float
                   ) -> tuple[Searches, Searches, Searches]:
    """(B alone, B's first search beside A, B's next ones): see the module's docstring."""
    b_conn = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=b_conn) as b_http, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as a_http:
        alone, first, next_ = Searches(), Searches(), Searches()
        for _ in range(5):
            await search(b_http, gateway, questions.next(), alone)
            await asyncio.sleep(1.0)
        stop, a = asyncio.Event(), Searches()
        tasks = [asyncio.create_task(searching(a_http, gateway, questions, 0.0, stop, a))
                 for _ in range(32)]
        await asyncio.sleep(alone_for)  # B leaves the share window: A is alone
        await search(b_http, gateway, questions.next(), first)
        for _ in range(4):
            await asyncio.sleep(1.0)
            await search(b_http, gateway, questions.next(), next_)
        stop.set()
        await asyncio.gather(*tasks)
    return alone, first, next_


async def measure(gateways: list[str], data: Path, rounds: int, alone_for: float
                  ) -> list[tuple[Searches, Searches, Searches]]:
    questions = Questions(data)
    await prepare(gateways, questions)
    merged = [(Searches(), Searches(), Searches()) for _ in gateways]
    for r in range(rounds):
        for k in range(len(gateways)):
            i = (k + r) % len(gateways)
            got = await newcomer(gateways[i], questions, alone_for)
            for into, part in zip(merged[i], got, strict=True):
                into.ms += part.ms
                into.statuses.update(part.statuses)
    return merged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--alone-for", type=float, default=11.0,
                        help="seconds A runs alone before B's first search (past "
                             "share_seconds, 10 by default)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME:VAR=VALUE,...")
    args = parser.parse_args()
    configs = [parse_config(c) for c in args.config] or [("defaults", {})]
    print(f"# bench_newcomer: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores; {len(configs)} configurations, a stack each; "
          f"{args.rounds} rounds, each: every stack in turn, B alone 5 searches, A alone "
          f"{args.alone_for:g} s (concurrency 32), B's first search, 4 more a second apart")
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-newcomer-"))
    with contextlib.ExitStack() as stacks:
        gateways = config_stacks(stacks, configs, tmp)
        results = asyncio.run(measure(gateways, Path(args.data), args.rounds, args.alone_for))
    print(f"{'configuration':<28} {'alone p50':>9} {'p95':>7} {'first p50':>9} {'max':>7} "
          f"{'next p50':>8} {'p95':>7}  statuses")
    for (name, _), (alone, first, next_) in zip(configs, results, strict=True):
        statuses = dict(alone.statuses + first.statuses + next_.statuses)
        print(f"{name:<28} {pct(alone.ms, 50):>9.1f} {pct(alone.ms, 95):>7.1f} "
              f"{pct(first.ms, 50):>9.1f} {max(first.ms, default=float('nan')):>7.1f} "
              f"{pct(next_.ms, 50):>8.1f} {pct(next_.ms, 95):>7.1f}  {statuses}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
