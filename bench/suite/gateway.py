"""The gateway's overhead: one matrixd search through the gateway, direct, and through a
bare proxy (the floor); or this checkout's gateway against a baseline's.

One corpus of random 384-d vectors with short texts; the same matrixd search at
concurrency 16 straight to matrixd, through the gateway and through a bare aiohttp proxy
(bench/peers/floors.py: the overhead any aiohttp hop adds here), in rounds that rotate
the paths, for a text (hybrid) search and a vector search; then each path's CPU per
search. With --baseline: the same searches through this checkout's gateway and the
baseline's, alternating; with --beir too, one corpus of SciFact + Cranfield + CISI
(bench/data/beir.py) and SciFact's queries as text: the default search and a vector-only
one, p50 one text at a time through all four in a turn shuffled a text, QPS alternating.

Target: gateway p50 overhead <= 15% (the bare proxy is the floor).
"""

from __future__ import annotations

import random
from typing import Any

import aiohttp
import numpy as np
import psutil

from bench.data import beir, vectors
from bench.harness import Run
from bench.harness.http import search, session
from bench.harness.timing import closed_loop, median, pct, rotated, shuffled
from bench.peers.floors import floor

OPTIONS = {"items": 2000, "queries": 400, "rounds": 4, "beir": (False, "with --baseline: the BEIR corpus"),
           "prf_off": (False, 'with --baseline: the text search with "prf": {"docs": 0}')}
QUICK = {"items": 500, "queries": 100, "rounds": 2}
CONCURRENCY = 16


def searches(corpus: str, prf_off: bool = False) -> dict[str, dict[str, Any]]:
    qv = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    qv /= np.linalg.norm(qv)
    text: dict[str, Any] = {"query_text": "vector search latency", "corpora": [corpus], "k": 10}
    if prf_off:
        text["prf"] = {"docs": 0}
    return {"text (hybrid)": text,
            "vector": {"query_vector": qv.tolist(), "corpora": [corpus], "k": 10, "mode": "vector"}}


async def texts(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
                asked: list[str | None]) -> tuple[list[float], float]:
    """One search per text at CONCURRENCY (None: the body's own text)."""
    return await closed_loop(lambda t: search(http, url, body if t is None else
                                              {**body, "query_text": t}), asked, CONCURRENCY)


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


async def paths(run: Run) -> None:
    a = run.args
    with run.stack() as stack, floor("proxy", "--upstream", stack.url("matrixd")) as proxy:
        urls = {"direct to matrixd": stack.url("matrixd"), "through gateway": stack.gateway,
                "bare aiohttp proxy": proxy}
        gateway = stack.daemon("gateway")
        assert stack.proc is not None, "--url: the paths need a stack started here"
        daemons = [p for p in psutil.Process(stack.proc.pid).children() if p.pid != gateway.pid]
        rows, cpu_rows = [], []
        async with session(CONCURRENCY) as http:
            await vectors.random_corpus(http, stack.gateway, "bench_gateway", a.items)
            for label, body in searches("bench_gateway").items():
                for url in urls.values():
                    await texts(http, url, body, [None] * 50)  # warm-up
                lat: dict[str, list[float]] = {p: [] for p in urls}
                wall = dict.fromkeys(urls, 0.0)
                gw_cpu = direct_cpu = 0.0
                for rnd in range(a.rounds):
                    for path in rotated(list(urls), rnd):
                        c0, d0 = cpu(gateway), sum(cpu(d) for d in daemons)
                        got, secs = await texts(http, urls[path], body, [None] * a.queries)
                        if path == "through gateway":
                            gw_cpu += cpu(gateway) - c0
                        elif path == "direct to matrixd":
                            direct_cpu += sum(cpu(d) for d in daemons) - d0
                        lat[path] += got
                        wall[path] += secs
                first = median(lat["direct to matrixd"])
                for path in urls:
                    p50 = median(lat[path])
                    rows.append((label, path, p50, pct(lat[path], 95), len(lat[path]) / wall[path],
                                 None if path == "direct to matrixd" else (p50 / first - 1) * 100))
                n = len(lat["direct to matrixd"])
                cpu_rows.append((label, direct_cpu * 1000 / n, gw_cpu * 1000 / n,
                                 gw_cpu / direct_cpu * 100))
    run.table(f"concurrency {CONCURRENCY}, {a.items} items, {a.rounds} x {a.queries} queries a path",
              ["search", "path", "p50 ms:.2f", "p95 ms:.2f", "QPS:.0f", "p50 overhead %:+.1f"], rows)
    run.table("CPU per search (load-independent)",
              ["search", "daemons ms direct:.2f", "the gateway adds ms:.2f", "share %:+.1f"], cpu_rows)
    run.figure(**{f"{r[0]} {r[1]} overhead %": r[5] for r in rows if r[5] is not None})


async def against_baseline(run: Run) -> None:
    a = run.args
    with run.sides() as sides:
        urls = {side: s.gateway for side, s in sides.items()}
        async with session(CONCURRENCY) as http:
            rows = []
            for url in urls.values():
                await vectors.random_corpus(http, url, "bench_gateway", a.items)
            for label, body in searches("bench_gateway", a.prf_off).items():
                for url in urls.values():
                    await texts(http, url, body, [None] * 50)  # warm-up
                lat: dict[str, list[float]] = {s: [] for s in urls}
                wall = dict.fromkeys(urls, 0.0)
                for rnd in range(a.rounds):
                    for side in rotated(list(urls), rnd):
                        got, secs = await texts(http, urls[side], body, [None] * a.queries)
                        lat[side] += got
                        wall[side] += secs
                rate = {s: len(lat[s]) / wall[s] for s in urls}
                for side in urls:
                    rows.append((label, side, median(lat[side]), pct(lat[side], 95), rate[side],
                                 rate["this"] / rate["baseline"] if side == "this" else None))
    run.table(f"this checkout vs baseline {run.baseline}, through the gateway, concurrency "
              f"{CONCURRENCY}, {a.rounds} x {a.queries} queries a side, alternating",
              ["search", "side", "p50 ms:.2f", "p95 ms:.2f", "QPS:.0f", "QPS this / baseline:.2f"],
              rows)


async def beir_against_baseline(run: Run) -> None:
    a = run.args
    with run.sides() as sides:
        urls = {side: s.gateway for side, s in sides.items()}
        async with session(CONCURRENCY) as http:
            docs = beir.documents(run.data)
            for url in urls.values():
                await beir.into(http, url, "bench_beir3", docs)
            asked: list[str | None] = list(beir.queries(run.data, a.queries))
            bodies = {"default (hybrid)": {"corpora": ["bench_beir3"], "k": 10},
                      "vector only": {"corpora": ["bench_beir3"], "k": 10, "mode": "vector"}}
            for body in bodies.values():
                for url in urls.values():
                    await texts(http, url, body, asked[:50])  # warm-up
            pairs = [(label, side) for label in bodies for side in urls]
            seq: dict[tuple[str, str], list[float]] = {p: [] for p in pairs}
            wall, done = dict.fromkeys(pairs, 0.0), dict.fromkeys(pairs, 0)
            rng = random.Random(7)
            for rnd in range(a.rounds):
                for text in asked[:100]:  # one at a time, the turn shuffled a text
                    for label, side in shuffled(pairs, rng):
                        seq[(label, side)] += (await texts(http, urls[side], bodies[label],
                                                           [text]))[0]
                for label, body in bodies.items():
                    for side in rotated(list(urls), rnd):
                        got, secs = await texts(http, urls[side], body, asked)
                        wall[(label, side)] += secs
                        done[(label, side)] += len(got)
    fig = {p: (median(seq[p]), pct(seq[p], 95), done[p] / wall[p]) for p in pairs}
    run.table(f"this checkout vs baseline {run.baseline}: one corpus of {len(docs):,} documents "
              f"(SciFact + Cranfield + CISI), {len(asked)} SciFact queries as text, {a.rounds} "
              f"rounds; p50/p95 one at a time, QPS at concurrency {CONCURRENCY}",
              ["search", "side", "p50 ms:.2f", "p95 ms:.2f", "QPS @16:.0f"],
              [(label, side, *fig[(label, side)]) for label, side in pairs])
    d, v = "default (hybrid)", "vector only"
    ratio = fig[(d, "this")][2] / fig[(d, "baseline")][2]
    run.say(f"default search QPS, this / baseline: {ratio:.2f}x", default_qps_ratio=ratio)
    for side in urls:
        run.say(f"default p50 / vector-only p50 ({side}): "
                f"{fig[(d, side)][0] / fig[(v, side)][0]:.2f}")


async def main(run: Run) -> None:
    if run.baseline is None:
        await paths(run)
    elif run.args.beir:
        await beir_against_baseline(run)
    else:
        await against_baseline(run)
