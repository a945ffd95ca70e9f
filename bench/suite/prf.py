"""Hybrid search with and without pseudo-relevance feedback, this checkout and a baseline.

SciFact + Cranfield + CISI as one corpus; SciFact's queries as text, one at a time, every
(side, search) in a turn shuffled a text. Target: PRF costs <= 1.2x the p50."""

import random

from bench.data import beir
from bench.harness import Run
from bench.harness.http import search, session
from bench.harness.timing import median, ms, pct, shuffled

OPTIONS = {"queries": 200}
QUICK = {"queries": 30}
SEARCHES = {"hybrid": {}, "hybrid, prf off": {"prf": {"docs": 0}}}


async def main(run: Run) -> None:
    with run.sides() as stacks:                      # "this" (and "baseline" with --baseline)
        async with session() as http:
            for s in stacks.values():
                await beir.into(http, s.gateway, "beir3", beir.documents(run.data))
            texts = beir.queries(run.data, run.args.queries)
            turns = [(side, name) for side in stacks for name in SEARCHES]
            lat = {t: [] for t in turns}
            rng = random.Random(7)
            for text in texts:
                for side, name in shuffled(turns, rng):
                    body = {"corpora": ["beir3"], "query_text": text, **SEARCHES[name]}
                    lat[(side, name)].append(await ms(search(http, stacks[side].gateway, body)))
    run.table("one text at a time, the turn shuffled a text",
              ["side", "search", "p50 ms:.2f", "p95 ms:.2f"],
              [(*t, median(x), pct(x, 95)) for t, x in lat.items()])
