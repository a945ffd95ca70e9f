"""One question across many corpora as fast as across one: the default search over the
same documents as one corpus and as 4 and 16, this checkout beside a baseline checkout.

SciFact (train) + Cranfield (dev) + CISI (dev), 8,041 documents, loaded into a stack as
ONE corpus, as 16 corpora split by a hash of the id (bench/data/beir.py), and as 4 and 16
corpora split by set and then by the hash (SciFact 2 and 10, Cranfield 1 and 3, CISI 1
and 3: corpora of three kinds, so the fan-out's resource selection weighs every word of
every question, where 16 parts of one mix weigh as one). The default search (POST
/v1/matrix/search, query text, k 10: selection on where the checkout has it, the
corpora's profiles built before the timing) through the gateway with SciFact's queries
against each: p50 / p95 one at a time (the systems alternating query
by query) and QPS at concurrency 8 (median of --rounds rounds, alternating). With
--baseline the baseline's stack is measured alternately in the same run; --upsert N
times a bulk upsert of N synthetic items into a new corpus on each side (this, baseline,
baseline, this).

Targets (docs/decisions/0047-federated-search-is-the-union.md): 16 corpora <= 1.5x one corpus; one corpus not slower
than the baseline by more than 1.2x; the bulk upsert not slower by more than 1.3x; 4 and 16
corpora not slower than the baseline by more than 1.1x (docs/decisions/0240-resource-selection.md).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable
from typing import Any

import aiohttp
import numpy as np

from bench.data import beir
from bench.harness import Run
from bench.harness.http import CORPORA, call, post, profiled, search, session
from bench.harness.timing import alternated, median, ms, pct, qps

OPTIONS = {"queries": 200, "rounds": 3,
           "upsert": (0, "also time a bulk upsert of N items on each side (0: not)")}
QUICK = {"queries": 40, "rounds": 2}
PARTS, FEW, CONCURRENCY = 16, 4, 8
WORDS = ("ferry lagoon kelp pier harbour tide storm sail anchor rope deck mast hull "
         "keel wave shore dune reef gull crab").split()


async def upsert_seconds(http: aiohttp.ClientSession, base: str, name: str, n: int) -> float:
    """A bulk upsert of n synthetic items into a new corpus (then dropped), in seconds."""
    rng = np.random.default_rng(11)
    await post(http, f"{base}{CORPORA}", {"name": name, "dim": 384})
    t0 = time.perf_counter()
    for start in range(0, n, 500):
        vecs = rng.standard_normal((min(500, n - start), 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        batch = [{"id": f"u{start + i}", "vector": v.tolist(),
                  "text": " ".join(WORDS[int(j)] for j in rng.integers(0, len(WORDS), 12))}
                 for i, v in enumerate(vecs)]
        await post(http, f"{base}{CORPORA}/{name}/items", {"items": batch})
    took = time.perf_counter() - t0
    await call(http, "DELETE", f"{base}{CORPORA}/{name}")
    return took


async def load(http: aiohttp.ClientSession, url: str, docs: list[Any], names: list[str],
               kinds: dict[int, dict[str, list[Any]]]) -> None:
    """The documents as one corpus, by hash, by set and hash; their profiles built."""
    await beir.into(http, url, "bc_one", docs)
    for i, name in enumerate(names):
        await beir.into(http, url, name, [d for d in docs if beir.part_of(d.id, PARTS) == i])
    for parts in kinds.values():
        for name, part in parts.items():
            await beir.into(http, url, name, part)
    await profiled(http, url, ["bc_one", *names, *(c for p in kinds.values() for c in p)])


def by_set(docs: list[Any], n: int) -> dict[str, list[Any]]:
    """n corpora: each set's documents (ids `sf:`, `cr:`, `ci:`) split by the hash, the
    most parts to the largest (n = 4: 2, 1, 1; n = 16: 10, 3, 3)."""
    shares = {"sf": 2, "cr": 1, "ci": 1} if n == FEW else {"sf": 10, "cr": 3, "ci": 3}
    out = {}
    for tag, k in shares.items():
        mine = [d for d in docs if d.id.startswith(f"{tag}:")]
        for i in range(k):
            out[f"bc_{n}k_{tag}{i}"] = [d for d in mine if beir.part_of(d.id, k) == i]
    return out


async def main(run: Run) -> None:
    a = run.args
    docs = beir.documents(run.data)
    names = [f"bc_part{i:02d}" for i in range(PARTS)]
    kinds = {n: by_set(docs, n) for n in (FEW, PARTS)}
    with run.sides() as stacks:
        sides = {side: s.gateway for side, s in stacks.items()}
        async with session(CONCURRENCY) as http:
            for side, url in sides.items():
                t0 = time.perf_counter()
                with run.between():  # the loading: others may measure meanwhile
                    await load(http, url, docs, names, kinds)
                run.progress(f"{side}: {len(docs):,} documents as 1 corpus, as {PARTS}, and as "
                             f"{FEW} and {PARTS} of 3 kinds in {time.perf_counter() - t0:.0f} s")

            texts = beir.queries(run.data, a.queries)
            setups = {"one corpus": {"corpora": ["bc_one"], "k": 10},
                      f"{PARTS} corpora": {"corpora": names, "k": 10},
                      **{f"{n} corpora of 3 kinds": {"corpora": list(kinds[n]), "k": 10}
                         for n in (FEW, PARTS)}}
            systems = [(side, setup) for side in sides for setup in setups]

            def ask(system: tuple[str, str], text: str) -> Awaitable[bytes]:
                return search(http, sides[system[0]], {**setups[system[1]], "query_text": text})

            for system in systems:  # warm-up: caches, connections
                for text in texts[:30]:
                    await ask(system, text)
            lat: dict[tuple[str, str], list[float]] = {s: [] for s in systems}
            for i, text in enumerate(texts):
                for system in alternated(systems, i):
                    lat[system].append(await ms(ask(system, text)))
            rates: dict[tuple[str, str], list[float]] = {s: [] for s in systems}
            for rnd in range(a.rounds):
                for system in alternated(systems, rnd):
                    rates[system].append(await qps(lambda t, s=system: ask(s, t),
                                                   texts, CONCURRENCY))
            fig = {s: (median(lat[s]), pct(lat[s], 95), statistics.median(rates[s])) for s in systems}
            run.table(f"The default search (hybrid + feedback, k 10) through the gateway, "
                      f"{len(texts)} SciFact queries; {len(docs):,} documents as one corpus, as {PARTS} "
                      f"corpora split by a hash of the id, and as {FEW} and {PARTS} split by set and "
                      f"hash. p50 / p95 one at a time; QPS at "
                      f"concurrency {CONCURRENCY}, median of {a.rounds} rounds.",
                      ["side", "corpora", "p50 ms:.2f", "p95 ms:.2f", "QPS @8:.1f"],
                      [(*s, *fig[s]) for s in systems])
            many = f"{PARTS} corpora"
            for side in sides:
                one, b = fig[(side, "one corpus")], fig[(side, many)]
                run.say(f"{side}: {many} / one corpus: p50 {b[0] / one[0]:.2f}x, p95 "
                        f"{b[1] / one[1]:.2f}x, QPS {one[2] / b[2]:.2f}x fewer (target <= 1.5x)",
                        **{f"{side} many/one p50": b[0] / one[0]})
            if "baseline" in sides:
                for setup in setups:
                    x, y = fig[("this", setup)], fig[("baseline", setup)]
                    run.say(f"{setup}: this / baseline: p50 {x[0] / y[0]:.2f}x, p95 "
                            f"{x[1] / y[1]:.2f}x, QPS {x[2] / y[2]:.2f}x")
            if a.upsert:
                took: dict[str, list[float]] = {s: [] for s in sides}
                order = ["this", "baseline", "baseline", "this"] if "baseline" in sides else ["this"]
                for i, side in enumerate(order):
                    took[side].append(await upsert_seconds(http, sides[side], f"bc_upsert{i}",
                                                           a.upsert))
                    run.say(f"bulk upsert of {a.upsert:,} items ({side}): {took[side][-1]:.1f} s")
                if "baseline" in sides:
                    mine, theirs = statistics.mean(took["this"]), statistics.mean(took["baseline"])
                    run.say(f"bulk upsert of {a.upsert:,}, mean of two: this {mine:.1f} s, baseline "
                            f"{theirs:.1f} s, this / baseline {mine / theirs:.2f} (target <= 1.3)")
