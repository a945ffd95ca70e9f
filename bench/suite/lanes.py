"""embedd's lanes, measured in one run: a question's embed latency while a 2,000-text bulk
load runs, and the bulk load's texts/s alone and under two searching clients.

In process, the real local model and embedd's Coalescer, no HTTP. Variants: fifo (one
queue, questions behind documents), lanes (the interactive lane served first by the
shared workers), reserved (lanes plus one thread for questions only), reserved+nice
(reserved, the shared bulk threads at OS priority +10). Each searching client embeds a
question, waits 50 ms (the rest of its search), and again, while the bulk load runs. Bulk
alone is measured before and after the variants (its mean is the baseline); the variants
run in turn, alternating order each round.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.harness import Run
from bench.harness.timing import alternated, pct
from internal.embedd.backends import nice_thread
from internal.embedd.coalesce import Coalescer, Lane
from internal.embedd.local import LocalModel

OPTIONS = {"texts": 2000, "rounds": 1, "clients": 2}
QUICK = {"texts": 500}
VARIANTS = ("fifo", "lanes", "reserved", "reserved+nice")
REQUEST = 250  # texts per bulk request (embedd takes at most 256)


def read_texts(path: Path, field: str, n: int) -> list[str]:
    out: list[str] = []
    with path.open() as f:
        for line in f:
            if len(out) >= n:
                break
            row = json.loads(line)
            text = " ".join(str(row.get(k) or "") for k in ("title", field)).strip()
            if text:
                out.append(text)
    return out


async def variant(model: LocalModel, name: str, docs: list[str], questions: list[str],
                  clients: int) -> tuple[float, list[float]]:
    """(bulk texts/s, question latencies in ms)."""
    reserved = 1 if name.startswith("reserved") else 0
    shared = ThreadPoolExecutor(2, thread_name_prefix="bulk",
                                initializer=nice_thread(10 if name == "reserved+nice" else 0))
    own = ThreadPoolExecutor(1, thread_name_prefix="interactive") if reserved else None
    co = Coalescer(model.embed, shared, batch_size=1, max_wait=0.0, workers=2,
                   reserved=reserved, reserved_executor=own)
    lane = Lane.BULK if name == "fifo" else Lane.INTERACTIVE
    latencies: list[float] = []
    done = asyncio.Event()

    async def client(k: int) -> None:
        i = k
        while not done.is_set():
            t0 = time.perf_counter()
            await co.embed([questions[i % len(questions)] + f" ({i})"], lane)
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


async def main(run: Run) -> None:
    a = run.args
    docs = read_texts(run.need("data", "cranfield", "corpus.jsonl"), "text", a.texts)
    docs += read_texts(run.need("data", "cisi", "corpus.jsonl"), "text", a.texts - len(docs))
    questions = read_texts(run.need("data", "cranfield", "queries.jsonl"), "text", 200)
    model = LocalModel(1)
    model.embed(questions[:4])  # warm the session
    alone = [(await variant(model, "lanes", docs, questions, 0))[0]]
    speeds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    lats: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(a.rounds):
        for v in alternated(VARIANTS, r):
            tps, lat = await variant(model, v, docs, questions, a.clients)
            speeds[v].append(tps)
            lats[v] += lat
    alone.append((await variant(model, "lanes", docs, questions, 0))[0])
    base = statistics.mean(alone)
    run.say(f"bulk alone: {base:.1f} texts/s (runs: {', '.join(f'{x:.1f}' for x in alone)})")
    run.table(f"{len(docs)} bulk texts in requests of {REQUEST}, {a.clients} searching clients, "
              f"{a.rounds} round(s)", ["variant", "q p50 ms:.1f", "q p95 ms:.1f", "q max ms:.1f",
                                       "questions:d", "bulk t/s:.1f", "vs alone:.2f"],
              [(v, pct(lats[v], 50), pct(lats[v], 95), max(lats[v]), len(lats[v]),
                statistics.mean(speeds[v]), statistics.mean(speeds[v]) / base) for v in VARIANTS])
