"""The embedding daemon's HTTP throughput and latency against the same model in-process.

SciFact passages (title + text, --n) embedded three ways:
- in-process: LocalModel.embed on batches of [embedd] batch_size, texts sorted by length,
  `workers` calls at once (the parallelism embedd uses);
- HTTP: a real embedd process (cache off: every text reaches the model) and 4 concurrent
  clients each sending requests of 32 passages;
- one short query over HTTP (p50 of unique queries) and the same in-process.
In-process and HTTP alternate in slices of 200 passages so both see the same load.
--sweep also prints in-process sentences/s per batch size (how batch_size was chosen).

Targets: HTTP throughput >= 0.8x in-process; single-query p50 <= 10 ms.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import aiohttp

from bench.harness import Run
from bench.harness.http import post
from bench.harness.stacks import daemon
from internal.config import load
from internal.embedd.local import LocalModel

OPTIONS = {"n": 2000, "rounds": 1, "sweep": False}
QUICK = {"n": 400}
CLIENTS, PER_REQUEST, QUERIES = 4, 32, 60
COLD = {"LAKEHOUSE_EMBEDD_CACHE_SIZE": "0", "LAKEHOUSE_EMBEDD_BACKEND": "local",
        "LAKEHOUSE_EMBEDD_BACKENDS": "", "LAKEHOUSE_LOG_LEVEL": "warning"}


def passages(run: Run, n: int) -> list[str]:
    out: list[str] = []
    with run.need("data", "scifact", "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}. {doc['text']}".strip(". ")
            if text and text not in out:
                out.append(text)
            if len(out) >= n:
                break
    return out


async def http_throughput(http: aiohttp.ClientSession, base: str, texts: list[str]) -> float:
    chunks = [texts[i:i + PER_REQUEST] for i in range(0, len(texts), PER_REQUEST)]

    async def client() -> None:
        while chunks:
            await post(http, f"{base}/v1/embed", {"texts": chunks.pop(0)})

    t = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return len(texts) / (time.perf_counter() - t)


def inproc_throughput(model: LocalModel, texts: list[str], batch: int, workers: int) -> float:
    ordered = sorted(texts, key=len)
    batches = [ordered[i:i + batch] for i in range(0, len(ordered), batch)]
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(model.embed, batches))
    return len(texts) / (time.perf_counter() - t)


async def query_p50(embed: object, tag: str) -> float:
    times = []
    for i in range(QUERIES):
        text = f"does vitamin d {tag}{i} reduce fracture risk"
        t = time.perf_counter()
        got = embed(text)  # type: ignore[operator]
        if asyncio.iscoroutine(got):
            await got
        times.append(time.perf_counter() - t)
    return statistics.median(times[5:]) * 1000


async def main(run: Run) -> None:
    cfg = load().embedd
    texts = passages(run, run.args.n)
    model = LocalModel(cfg.threads)
    model.embed(texts[:8])
    if run.args.sweep:
        sample = texts[:400]
        run.table(f"in-process sentences/s ({len(sample)} passages, sorted, {cfg.workers} workers)",
                  ["batch:d", "sentences/s:.1f"],
                  [(b, inproc_throughput(model, sample, b, cfg.workers)) for b in (1, 2, 4, 8, 16, 32)])
    inproc, over_http, q_in, q_http = [], [], [], []
    with daemon("embedd", COLD) as embedd:
        async with aiohttp.ClientSession() as http:
            await http_throughput(http, embedd.base, texts[:16])  # warm-up
            for r in range(run.args.rounds):
                t_in = t_http = 0.0
                for i in range(0, len(texts), 200):  # slices alternate: the same load on both
                    part = texts[i:i + 200]
                    t_in += len(part) / inproc_throughput(model, part, cfg.batch_size, cfg.workers)
                    t_http += len(part) / await http_throughput(http, embedd.base, part)
                inproc.append(len(texts) / t_in)
                over_http.append(len(texts) / t_http)
                q_in.append(await query_p50(lambda t: model.embed([t]), f"r{r}"))
                q_http.append(await query_p50(lambda t: post(
                    http, f"{embedd.base}/v1/embed", {"texts": [t], "input_type": "query"}), f"r{r}"))
    ip, hp, qi, qh = (statistics.median(x) for x in (inproc, over_http, q_in, q_http))
    run.table(f"embedd: {len(texts)} SciFact passages, batch_size={cfg.batch_size}, workers="
              f"{cfg.workers}, threads={cfg.threads or 'auto'}, rounds={run.args.rounds}, "
              f"{CLIENTS} HTTP clients x {PER_REQUEST} texts a request",
              ["measure", "in-process:.2f", "HTTP:.2f", "ratio:.2f", "target"],
              [("throughput (sentences/s)", ip, hp, hp / ip, ">= 0.8x"),
               ("one short query p50 (ms)", qi, qh, qh / qi, "HTTP <= 10 ms")])
