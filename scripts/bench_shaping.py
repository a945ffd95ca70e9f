"""Benchmark the result-shaping options against the default search, on one stack.

Starts the whole stack (scripts/bench_gateway.py's helpers), loads one corpus of 8,043
documents (SciFact 5,183 + Cranfield 1,400 + CISI 1,460; text embedded by the stack's
model, vectors cached in var/eval-cache), then sends SciFact's queries as text through the
gateway: the default search (hybrid, k 10) with no option, with each of highlight /
group_by / facets (corpus, tags, type) / diversity, and with all of them. p50/p95 one
search at a time, each text through every variant in a turn shuffled a text (seeded), so
the machine's swings fall on all alike; QPS at concurrency 16, variants in alternating
order each round. Prints each variant's p50 against the plain default's measured in the
same run (targets: highlight <= +15%, facets <= +25%). With --baseline DIR (a checkout of
another commit, e.g. `git archive REV | tar -x -C DIR`), both stacks run side by side and
every text goes through every (side, variant) in one shuffled turn: candidates measured
in one run. The texts repeat (rounds, variants), so embedd's cache serves the questions and
the semantic passages after their first search; `--cold` turns that cache off on every
stack (each text embedded afresh, as a question never asked before).

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_shaping.py --beir ../shared/data [--queries 300] \\
        [--rounds 2] [--baseline DIR] [--cold]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gateway import (
    CONCURRENCY,
    ROOT,
    beir_queries,
    load_beir,
    load_line,
    on_stacks,
    run_texts,
)

CORPUS = "bench_beir3"
OPTIONS: dict[str, dict[str, Any]] = {
    "none": {},
    "highlight": {"highlight": True},
    "group_by": {"group_by": "parent"},
    "facets (3)": {"facets": ["corpus", "tags", "type"]},
    "diversity": {"diversity": 0.5},
}
OPTIONS["all"] = {k: v for opts in OPTIONS.values() for k, v in opts.items()}


async def measure(args: argparse.Namespace, urls: dict[str, str]) -> None:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        for url in urls.values():
            n = await load_beir(session, url, CORPUS, args.beir)
        texts: list[str | None] = list(beir_queries(args.beir, args.queries))
        bodies = {label: {"corpora": [CORPUS], "k": 10, **opts} for label, opts in OPTIONS.items()}
        runs = [(side, label) for side in urls for label in bodies]
        for side, label in runs:
            await run_texts(session, urls[side], bodies[label], texts[:30])  # warm-up
        seq: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
        wall = dict.fromkeys(runs, 0.0)
        done = dict.fromkeys(runs, 0)
        rng = random.Random(7)
        for rnd in range(args.rounds):
            for text in texts[:args.sequential]:
                for side, label in rng.sample(runs, len(runs)):
                    got, _ = await run_texts(session, urls[side], bodies[label], [text])
                    seq[(side, label)] += got
            for side, label in (runs if rnd % 2 == 0 else runs[::-1]):
                got, secs = await run_texts(session, urls[side], bodies[label], texts)
                wall[(side, label)] += secs
                done[(side, label)] += len(got)
        print(f"\none corpus of {n:,} documents (SciFact + Cranfield + CISI), the default search "
              f"(hybrid, k 10) through the gateway, {len(texts)} SciFact queries as text, "
              f"{args.rounds} rounds; p50/p95 one at a time ({args.sequential} texts a round, "
              f"every variant{' of both sides' if len(urls) > 1 else ''} in a shuffled turn), "
              f"QPS at concurrency {CONCURRENCY}"
              f"{'; embedd cache off' if args.cold else ''}\n")
        many = len(urls) > 1
        print(f"| {'side | ' if many else ''}options | p50 ms | p95 ms | QPS @16 | p50 vs none |")
        print(f"|{'---|' if many else ''}---|---:|---:|---:|---:|")
        for side, label in runs:
            base = statistics.median(seq[(side, "none")])
            xs = sorted(seq[(side, label)])
            p50 = statistics.median(xs)
            print(f"| {side + ' | ' if many else ''}{label} | {p50:.2f} | "
                  f"{xs[int(len(xs) * 0.95) - 1]:.2f} | {done[(side, label)] / wall[(side, label)]:.0f}"
                  f" | {(p50 / base - 1) * 100:+.1f}% |")
        print("\n" + load_line())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beir", type=Path, required=True, help="the data folder (../shared/data)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--sequential", type=int, default=100, help="texts a round one at a time")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a checkout of another commit, measured alongside in the same run")
    ap.add_argument("--cold", action="store_true",
                    help="embedd's cache off ([embedd] cache_size = 0) on every stack")
    args = ap.parse_args()
    if args.cold:
        os.environ["LAKEHOUSE_EMBEDD_CACHE_SIZE"] = "0"
    roots = {"this": ROOT} if args.baseline is None else {"this": ROOT,
                                                           "baseline": args.baseline}
    return on_stacks("lakehouse-bench-shaping-", roots, lambda urls: measure(args, urls))

if __name__ == "__main__":
    raise SystemExit(main())
