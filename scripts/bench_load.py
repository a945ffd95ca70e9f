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
own alone and against all the configurations' B alone pooled); without `--fairness-only`,
the bulk jobs' searches on each configuration in turn (scripts/bench_load_configs.py).

Each phase's searches are also cut into their stages, p50 and p95 of each: matrixd's
embedding of the question (`embed_ms`), vectord's search (its slowest corpus's `ms`),
matrixd's whole (`took_ms`) and what was outside matrixd (the client's time less
`took_ms`: the gateway, the client, the loopback), so a p95 that grows shows where.

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
import os
import tempfile
from pathlib import Path

from bench_load_core import ROOT, main_async
from bench_stacks import running_stack


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
                        help="one configuration (a stack of its own with these variables "
                        "set); repeatable: the fairness case (--fairness-only) or the bulk "
                        "jobs' searches (scripts/bench_load_configs.py) on each in turn")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-load-"))
    if args.config:
        from bench_load_configs import compare_bulk, compare_configs

        (compare_configs if args.fairness_only else compare_bulk)(args, tmp)
        return 0
    with running_stack(tmp / "stack") as gateway:
        asyncio.run(main_async(args, gateway, tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
