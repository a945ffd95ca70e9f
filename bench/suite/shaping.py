"""The result-shaping options against the default search, on one stack (or two).

One corpus of SciFact + Cranfield + CISI (bench/data/beir.py); SciFact's queries as text
through the gateway: the default search (hybrid, k 10) with no option, with each of
highlight / group_by / facets (corpus, tags, type) / diversity, and with all of them. p50
/ p95 one search at a time, each text through every variant in a turn shuffled a text
(seeded); QPS at concurrency 16, variants in alternating order each round. Each variant's
p50 against the plain default's in the same run. With --baseline both stacks run and
every text goes through every (side, variant) in one shuffled turn. The texts repeat, so
embedd's cache serves the questions after their first search; --cold turns that cache off
on every stack (each text embedded afresh, as a question never asked before).

Targets: highlight <= +15%, facets <= +25% (p50 against none).
"""

from __future__ import annotations

import random
from typing import Any

from bench.data import beir
from bench.harness import Run
from bench.harness.http import search, session
from bench.harness.timing import alternated, closed_loop, median, ms, pct, shuffled

OPTIONS = {"queries": 300, "sequential": (100, "texts a round one at a time"), "rounds": 2,
           "cold": (False, "embedd's cache off ([embedd] cache_size = 0) on every stack")}
QUICK = {"queries": 60, "sequential": 30, "rounds": 1}
CORPUS, CONCURRENCY = "bench_beir3", 16
SHAPES: dict[str, dict[str, Any]] = {
    "none": {}, "highlight": {"highlight": True}, "group_by": {"group_by": "parent"},
    "facets (3)": {"facets": ["corpus", "tags", "type"]}, "diversity": {"diversity": 0.5}}
SHAPES["all"] = {k: v for opts in SHAPES.values() for k, v in opts.items()}


async def main(run: Run) -> None:
    a = run.args
    env = {"LAKEHOUSE_EMBEDD_CACHE_SIZE": "0"} if a.cold else None
    with run.sides(env) as stacks:
        urls = {side: s.gateway for side, s in stacks.items()}
        async with session(CONCURRENCY) as http:
            docs = beir.documents(run.data)
            for url in urls.values():
                await beir.into(http, url, CORPUS, docs)
            texts = beir.queries(run.data, a.queries)
            bodies = {label: {"corpora": [CORPUS], "k": 10, **opts} for label, opts in SHAPES.items()}
            runs = [(side, label) for side in urls for label in bodies]

            def ask(r: tuple[str, str], text: str) -> Any:
                return search(http, urls[r[0]], {**bodies[r[1]], "query_text": text})

            for r in runs:  # warm-up
                await closed_loop(lambda t, r=r: ask(r, t), texts[:30], CONCURRENCY)
            seq: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
            wall, done = dict.fromkeys(runs, 0.0), dict.fromkeys(runs, 0)
            rng = random.Random(7)
            for rnd in range(a.rounds):
                for text in texts[:a.sequential]:
                    for r in shuffled(runs, rng):
                        seq[r].append(await ms(ask(r, text)))
                for r in alternated(runs, rnd):
                    got, secs = await closed_loop(lambda t, r=r: ask(r, t), texts, CONCURRENCY)
                    wall[r] += secs
                    done[r] += len(got)
    many = len(urls) > 1
    rows = [((side,) if many else ()) + (label, median(seq[(side, label)]),
            pct(seq[(side, label)], 95), done[(side, label)] / wall[(side, label)],
            (median(seq[(side, label)]) / median(seq[(side, "none")]) - 1) * 100)
            for side, label in runs]
    run.table(f"one corpus of {len(docs):,} documents (SciFact + Cranfield + CISI), the default "
              f"search (hybrid, k 10) through the gateway, {len(texts)} SciFact queries as text, "
              f"{a.rounds} rounds; p50/p95 one at a time ({a.sequential} texts a round, every "
              f"variant in a shuffled turn), QPS at concurrency {CONCURRENCY}"
              f"{'; embedd cache off' if a.cold else ''}",
              [*(["side"] if many else []), "options", "p50 ms:.2f", "p95 ms:.2f", "QPS @16:.0f",
               "p50 vs none %:+.1f"], rows)
    run.figure(**{f"{r[-5]} p50 vs none %": r[-1] for r in rows if not many})
