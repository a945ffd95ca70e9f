"""A client's first search beside a busy client that had the gateway to itself.

The `load` benchmark's fairness case starts the busy client A while the light client B is
in the share window, so A is held to its share from its first search. This is the other
order: A (the default search at concurrency 32) runs alone for longer than
`share_seconds`, holding every search place a lone client may have, then B (127.0.0.2)
asks once, a newcomer, and then once a second beside A. Per configuration (--config
NAME:VAR=VALUE,..., repeatable, a stack each, all up at once, measured in turn each
round): B alone, B's first search beside A and B's next ones.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

from bench.harness import Run
from bench.harness.clients import CORPORA, Questions, Searches, prepare, search, searching
from bench.harness.stacks import parse_config
from bench.harness.timing import pct

OPTIONS = {"rounds": 8, "alone_for": (11.0, "seconds A runs alone before B's first search"),
           "config": ([], "NAME:VAR=VALUE,... a stack of its own (repeatable)")}
QUICK = {"rounds": 1}


async def newcomer(gateway: str, questions: Questions, alone_for: float
                   ) -> tuple[Searches, Searches, Searches]:
    """(B alone, B's first search beside A, B's next ones)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            local_addr=("127.0.0.2", 0))) as b_http, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as a_http:
        alone, first, next_, a = Searches(), Searches(), Searches(), Searches()
        for _ in range(5):
            await search(b_http, gateway, questions.next(), CORPORA, alone)
            await asyncio.sleep(1.0)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(searching(a_http, gateway, questions, CORPORA, 0.0, stop, a))
                 for _ in range(32)]
        await asyncio.sleep(alone_for)  # B leaves the share window: A is alone
        await search(b_http, gateway, questions.next(), CORPORA, first)
        for _ in range(4):
            await asyncio.sleep(1.0)
            await search(b_http, gateway, questions.next(), CORPORA, next_)
        stop.set()
        await asyncio.gather(*tasks)
    return alone, first, next_


async def main(run: Run) -> None:
    configs = [parse_config(c) for c in run.args.config] or [("defaults", {})]
    questions = Questions(run.data)
    with contextlib.ExitStack() as held:
        gateways = [held.enter_context(run.stack(env, tag=f"stack{i}")).gateway
                    for i, (_, env) in enumerate(configs)]
        for gw in gateways:
            await prepare(run.root, gw, questions)
        merged = [(Searches(), Searches(), Searches()) for _ in gateways]
        for r in range(run.args.rounds):
            for k in range(len(gateways)):
                i = (k + r) % len(gateways)
                got = await newcomer(gateways[i], questions, run.args.alone_for)
                for into, part in zip(merged[i], got, strict=True):
                    into.add(part)
    run.table(f"{len(configs)} configurations, a stack each; {run.args.rounds} rounds, each: every "
              f"stack in turn, B alone 5 searches, A alone {run.args.alone_for:g} s (concurrency "
              "32), B's first search, 4 more a second apart; ms",
              ["configuration", "alone p50:.1f", "p95:.1f", "first p50:.1f", "max:.1f",
               "next p50:.1f", "p95:.1f", "statuses"],
              [(name, pct(alone.ms, 50), pct(alone.ms, 95), pct(first.ms, 50),
                max(first.ms, default=float("nan")), pct(next_.ms, 50), pct(next_.ms, 95),
                dict(alone.statuses + first.statuses + next_.statuses))
               for (name, _), (alone, first, next_) in zip(configs, merged, strict=True)])
