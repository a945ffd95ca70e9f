"""Prototypes of embedd's lanes, measured in one run: a question's embed latency while a
2,000-text bulk load runs, and the bulk load's texts/s alone and under two searching
clients.

In process, the real local model and embedd's Coalescer, no HTTP (the lanes are the
only thing compared). Variants:

- fifo: one queue, as before the lanes (questions queue behind documents);
- lanes: interactive lane served first by the shared workers;
- reserved: lanes plus one thread that embeds questions only;
- reserved+nice: reserved, and the shared (bulk) threads at OS priority +10.

Each searching client embeds a question, then waits 50 ms (the rest of its search),
and again, for as long as the bulk load runs. Bulk alone is measured before and after
the variants (its mean is the baseline); the variants run in turn, alternating order
each round.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_lanes.py [--texts 2000] [--rounds 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.embedd.backends import nice_thread  # noqa: E402
from internal.embedd.coalesce import Coalescer, Lane  # noqa: E402
from internal.embedd.local import LocalModel  # noqa: E402

VARIANTS = ("fifo", "lanes", "reserved", "reserved+nice")
REQUEST = 250  # texts per bulk request (embedd takes at most 256)


def read_texts(path: Path, field: str, n: int) -> list[str]:
    out: list[str] = []
    if n <= 0:
        return out
    with path.open() as f:
        for line in f:
            row = json.loads(line)
            text = " ".join(str(row.get(k) or "") for k in ("title", field)).strip()
            if text:
                out.append(text)
            if len(out) >= n:
                break
    return out


async def run_variant(model: LocalModel, variant: str, docs: list[str], questions: list[str],
                      clients: int) -> tuple[float, list[float]]:
    """(bulk texts/s, question latencies in ms)."""
    nice = 10 if variant == "reserved+nice" else 0
    reserved = 1 if variant.startswith("reserved") else 0
    shared = ThreadPoolExecutor(2, thread_name_prefix="bulk", initializer=nice_thread(nice))
    own = ThreadPoolExecutor(1, thread_name_prefix="interactive") if reserved else None
    co = Coalescer(model.embed, shared, batch_size=1, max_wait=0.0, workers=2,
                   reserved=reserved, reserved_executor=own)
    q_lane = Lane.BULK if variant == "fifo" else Lane.INTERACTIVE
    latencies: list[float] = []
    done = asyncio.Event()

    async def client(k: int) -> None:
        i = k
        while not done.is_set():
            t0 = time.perf_counter()
            await co.embed([questions[i % len(questions)] + f" ({i})"], q_lane)
            latencies.append((time.perf_counter() - t0) * 1000)
            i += clients
            await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(client(k)) for k in range(clients)]
    t0 = time.perf_counter()
    await asyncio.gather(*(co.embed(docs[s:s + REQUEST], Lane.BULK)
                           for s in range(0, len(docs), REQUEST)))
    took = time.perf_counter() - t0
    done.set()
    await asyncio.gather(*tasks)
    await co.close()
    shared.shutdown(wait=True)
    if own:
        own.shutdown(wait=True)
    return len(docs) / took, latencies


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--data", default=os.environ.get("LAKEHOUSE_DATA", str(ROOT.parent / "shared")))
    args = ap.parse_args()
    data = Path(args.data) / "data"
    docs = read_texts(data / "cranfield" / "corpus.jsonl", "text", args.texts)
    docs += read_texts(data / "cisi" / "corpus.jsonl", "text", args.texts - len(docs))
    questions = read_texts(data / "cranfield" / "queries.jsonl", "text", 200)
    model = LocalModel(1)
    model.embed(questions[:4])  # warm the session
    print(f"# bench_lanes: {len(docs)} bulk texts in requests of {REQUEST}, "
          f"{args.clients} searching clients, {args.rounds} round(s), {os.cpu_count()} cores")
    alone: list[float] = []
    speeds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    lats: dict[str, list[float]] = {v: [] for v in VARIANTS}
    tps, _ = await run_variant(model, "lanes", docs, questions, 0)
    alone.append(tps)
    for r in range(args.rounds):
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        for v in order:
            tps, lat = await run_variant(model, v, docs, questions, args.clients)
            speeds[v].append(tps)
            lats[v].extend(lat)
    tps, _ = await run_variant(model, "lanes", docs, questions, 0)
    alone.append(tps)
    base = statistics.mean(alone)
    print(f"bulk alone: {base:.1f} texts/s (runs: {', '.join(f'{a:.1f}' for a in alone)})")
    print(f"{'variant':<14} {'q p50 ms':>9} {'q p95 ms':>9} {'q max ms':>9} {'questions':>9} "
          f"{'bulk t/s':>9} {'vs alone':>9}")
    for v in VARIANTS:
        xs = lats[v]
        tp = statistics.mean(speeds[v])
        print(f"{v:<14} {pct(xs, 50):>9.1f} {pct(xs, 95):>9.1f} {max(xs):>9.1f} {len(xs):>9} "
              f"{tp:>9.1f} {tp / base:>8.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
