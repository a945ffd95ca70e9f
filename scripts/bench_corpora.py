"""One question across many corpora as fast as across one: the default search over the same
documents as one corpus and as 16, this checkout beside a baseline checkout.

SciFact (train) + Cranfield (dev) + CISI (dev), 8,041 documents (ids prefixed by set),
are loaded into a `lakehouse up` stack twice: as ONE corpus and as 16 corpora split by a
hash of the id (sha256, first byte mod 16), embedded by the stack (vectors cached in
var/eval-cache). The default search (POST /v1/matrix/search with the query text, k 10:
hybrid with feedback, whatever the defaults are) is asked through the gateway with
SciFact's queries against the one corpus and against the 16: p50 / p95 one at a time (the
systems alternating query by query) and QPS at concurrency 8 (median of --rounds rounds,
alternating). With --baseline DIR (a checkout of the previous main) the same stack of
that checkout is started too and measured alternately in the same run; --upsert N times
a bulk upsert of N synthetic items (384-d, short text) into a new corpus on each side,
in the order this, baseline, baseline, this.

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_corpora.py \
        [--queries 200] [--rounds 3] [--baseline ../main-before] [--upsert 100000]

Targets (DECISIONS.md, Federation): 16 corpora <= 1.5x one corpus; one corpus not slower
than the baseline by more than 1.2x; the bulk upsert not slower by more than 1.3x.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_gateway import BEIR_SETS, start_stack  # noqa: E402

from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.evaluation import beir  # noqa: E402
from internal.evaluation.ingest import ingest  # noqa: E402

PARTS = 16
CONCURRENCY = 8
ONE = "bc_one"
CACHE = ROOT / "var" / "eval-cache"
WORDS = ("ferry lagoon kelp pier harbour tide storm sail anchor rope deck mast hull "
         "keel wave shore dune reef gull crab").split()


def data_root() -> Path:
    root = Path(os.environ.get("LAKEHOUSE_DATA") or ROOT.parent / "shared") / "data"
    if not root.is_dir():
        raise SystemExit(f"{root}: no data (set LAKEHOUSE_DATA)")
    return root


def part_of(doc_id: str) -> int:
    return hashlib.sha256(doc_id.encode()).digest()[0] % PARTS


def documents(data: Path) -> list[beir.Doc]:
    docs: list[beir.Doc] = []
    for name, split, tag in BEIR_SETS:
        ds = beir.load(data / name, split)
        docs += [dataclasses.replace(d, id=f"{tag}:{d.id}") for d in ds.docs]
    return docs


async def load(session: aiohttp.ClientSession, base: str, docs: list[beir.Doc]) -> list[str]:
    """The documents as one corpus and as PARTS corpora; the parts' names."""
    vc, ec = VectordClient(session, base, timeout=600.0), EmbedClient(session, base, timeout=600.0)
    await ingest(vc, ec, ONE, docs, cache_dir=CACHE, cache_name="bench_gateway_beir3")
    names = [f"bc_part{i:02d}" for i in range(PARTS)]
    for i, name in enumerate(names):
        await ingest(vc, ec, name, [d for d in docs if part_of(d.id) == i], cache_dir=CACHE,
                     cache_name="bench_gateway_beir3")
    return names


async def one_search(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    async with session.post(f"{url}/v1/matrix/search", json=body) as r:
        await r.read()
        if r.status != 200:
            raise SystemExit(f"search answered {r.status}: {await r.text()}")
    return (time.perf_counter() - t0) * 1000


async def qps(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
              texts: list[str]) -> float:
    todo = list(reversed(texts))

    async def worker() -> None:
        while todo:
            text = todo.pop()
            await one_search(session, url, {**body, "query_text": text})

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return len(texts) / (time.perf_counter() - t0)


async def upsert_seconds(session: aiohttp.ClientSession, base: str, name: str, n: int) -> float:
    """A bulk upsert of n synthetic items into a new corpus (then dropped), in seconds."""
    rng = np.random.default_rng(11)
    async with session.post(f"{base}/v1/vectors/corpora", json={"name": name, "dim": 384}) as r:
        assert r.status == 201, await r.text()
    t0 = time.perf_counter()
    for start in range(0, n, 500):
        m = min(500, n - start)
        vecs = rng.standard_normal((m, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        batch = [{"id": f"u{start + i}", "vector": v.tolist(),
                  "text": " ".join(WORDS[int(j)] for j in rng.integers(0, len(WORDS), 12))}
                 for i, v in enumerate(vecs)]
        async with session.post(f"{base}/v1/vectors/corpora/{name}/items",
                                json={"items": batch}) as r:
            assert r.status == 200, await r.text()
    took = time.perf_counter() - t0
    async with session.delete(f"{base}/v1/vectors/corpora/{name}") as r:
        assert r.status == 200, await r.text()
    return took


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def measure(args: argparse.Namespace, sides: dict[str, str]) -> None:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
    timeout = aiohttp.ClientTimeout(total=3600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        docs = documents(data_root())
        parts: list[str] = []
        for side, url in sides.items():
            t0 = time.perf_counter()
            parts = await load(session, url, docs)
            print(f"{side}: {len(docs):,} documents loaded as 1 corpus and as {PARTS} in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
        texts = list(beir.load(data_root() / "scifact", "train").queries.values())[:args.queries]
        setups = {"one corpus": {"corpora": [ONE], "k": 10},
                  f"{PARTS} corpora": {"corpora": parts, "k": 10}}
        systems = [(side, setup) for side in sides for setup in setups]
        for side, setup in systems:  # warm-up: caches, connections
            for text in texts[:30]:
                await one_search(session, sides[side], {**setups[setup], "query_text": text})
        lat: dict[tuple[str, str], list[float]] = {s: [] for s in systems}
        for i, text in enumerate(texts):
            order = systems if i % 2 == 0 else systems[::-1]
            for side, setup in order:
                lat[(side, setup)].append(await one_search(
                    session, sides[side], {**setups[setup], "query_text": text}))
        rates: dict[tuple[str, str], list[float]] = {s: [] for s in systems}
        for rnd in range(args.rounds):
            order = systems if rnd % 2 == 0 else systems[::-1]
            for side, setup in order:
                rates[(side, setup)].append(await qps(session, sides[side], setups[setup], texts))
        print(f"\nThe default search (hybrid + feedback, k 10) through the gateway, "
              f"{len(texts)} SciFact queries; {len(docs):,} documents (SciFact + Cranfield + "
              f"CISI) as one corpus and as {PARTS} corpora split by a hash of the id. "
              f"p50 / p95 one at a time (systems alternating query by query); QPS at "
              f"concurrency {CONCURRENCY}, median of {args.rounds} rounds.\n")
        print("| side | corpora | p50 ms | p95 ms | QPS @8 |")
        print("|---|---|---:|---:|---:|")
        fig: dict[tuple[str, str], tuple[float, float, float]] = {}
        for side, setup in systems:
            ls = lat[(side, setup)]
            fig[(side, setup)] = (statistics.median(ls), pct(ls, 0.95),
                                  statistics.median(rates[(side, setup)]))
            p50, p95, q = fig[(side, setup)]
            print(f"| {side} | {setup} | {p50:.2f} | {p95:.2f} | {q:.1f} |")
        print()
        many = f"{PARTS} corpora"
        for side in sides:
            a, b = fig[(side, "one corpus")], fig[(side, many)]
            print(f"{side}: {many} / one corpus: p50 {b[0] / a[0]:.2f}x, p95 {b[1] / a[1]:.2f}x, "
                  f"QPS {a[2] / b[2]:.2f}x fewer (target <= 1.5x)")
        if "baseline" in sides:
            for setup in setups:
                a, b = fig[("this", setup)], fig[("baseline", setup)]
                print(f"{setup}: this / baseline: p50 {a[0] / b[0]:.2f}x, p95 {a[1] / b[1]:.2f}x, "
                      f"QPS {a[2] / b[2]:.2f}x")
        if args.upsert:
            took: dict[str, list[float]] = {s: [] for s in sides}
            order = ["this", "baseline", "baseline", "this"] if "baseline" in sides else ["this"]
            for i, side in enumerate(order):
                took[side].append(await upsert_seconds(session, sides[side], f"bc_upsert{i}",
                                                       args.upsert))
                print(f"bulk upsert of {args.upsert:,} items ({side}): {took[side][-1]:.1f} s",
                      flush=True)
            if "baseline" in sides:
                mine, theirs = statistics.mean(took["this"]), statistics.mean(took["baseline"])
                print(f"bulk upsert of {args.upsert:,}, mean of two: this {mine:.1f} s, baseline "
                      f"{theirs:.1f} s, this / baseline {mine / theirs:.2f} (target <= 1.3)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                    help="a checkout of the previous main, measured in the same run")
    ap.add_argument("--upsert", type=int, default=0, metavar="N",
                    help="also time a bulk upsert of N items on each side (0: not)")
    args = ap.parse_args()
    print(f"# {' '.join(sys.argv)}  ({datetime.date.today().isoformat()})", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-corpora-"))
    procs: list[subprocess.Popen[str]] = []
    try:
        proc, urls = start_stack(tmp / "this")
        procs.append(proc)
        sides = {"this": urls["gateway"]}
        if args.baseline is not None:
            bproc, burls = start_stack(tmp / "baseline", args.baseline.resolve())
            procs.append(bproc)
            sides["baseline"] = burls["gateway"]
        asyncio.run(measure(args, sides))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
