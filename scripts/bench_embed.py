"""Benchmark embedd: HTTP throughput and latency against the same model in-process.

Embeds SciFact passages (title + text, default 2,000) three ways and prints one table:
- in-process: LocalModel.embed on batches of [embedd] batch_size, texts sorted by
  length, `workers` calls at once (the same parallelism embedd uses);
- HTTP: a real embedd process (cache off, so every text reaches the model) and 4
  concurrent clients each sending requests of 32 passages;
- one short query over HTTP (p50 of unique queries, so the cache cannot answer), and
  the same query in-process.
In-process and HTTP alternate in slices of 200 passages so both see the same load.
Targets: HTTP throughput >= 0.8x in-process; single-query p50 <= 10 ms.

    .venv/bin/python scripts/bench_embed.py [--n 2000] [--rounds 1] [--sweep]

--sweep also prints in-process sentences/s per batch size (how batch_size was chosen).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.config import load  # noqa: E402
from internal.embedd.local import LocalModel  # noqa: E402

CLIENTS = 4
PER_REQUEST = 32
QUERIES = 60


def data_dir() -> Path:
    return Path(os.environ.get("LAKEHOUSE_DATA") or ROOT.parent / "shared")


def passages(n: int) -> list[str]:
    out: list[str] = []
    with (data_dir() / "data" / "scifact" / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}. {doc['text']}".strip(". ")
            if text and text not in out:
                out.append(text)
            if len(out) >= n:
                break
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_embedd(port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LAKEHOUSE_EMBEDD_PORT": str(port), "LAKEHOUSE_EMBEDD_CACHE_SIZE": "0",
           "LAKEHOUSE_EMBEDD_BACKEND": "local", "LAKEHOUSE_EMBEDD_BACKENDS": "",
           "LAKEHOUSE_LOG_LEVEL": "warning", "LAKEHOUSE_LOG_FORMAT": "json"}
    return subprocess.Popen([sys.executable, "-m", "internal.embedd.server"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def wait_up(http: aiohttp.ClientSession, base: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise SystemExit("embedd exited during start-up")
        try:
            async with http.get(f"{base}/healthz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("embedd did not come up in 120 s")


async def http_throughput(http: aiohttp.ClientSession, base: str, texts: list[str]) -> float:
    chunks = [texts[i:i + PER_REQUEST] for i in range(0, len(texts), PER_REQUEST)]
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    for c in chunks:
        queue.put_nowait(c)

    async def client() -> None:
        while not queue.empty():
            chunk = queue.get_nowait()
            async with http.post(f"{base}/v1/embed", json={"texts": chunk}) as resp:
                out = await resp.json()
                assert resp.status == 200 and len(out["vectors"]) == len(chunk), out

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


async def http_query_p50(http: aiohttp.ClientSession, base: str, tag: str) -> float:
    times = []
    for i in range(QUERIES):
        body = {"texts": [f"does vitamin d {tag}{i} reduce fracture risk"], "input_type": "query"}
        t = time.perf_counter()
        async with http.post(f"{base}/v1/embed", json=body) as resp:
            await resp.read()
        times.append(time.perf_counter() - t)
    return statistics.median(times[5:]) * 1000


def inproc_query_p50(model: LocalModel, tag: str) -> float:
    times = []
    for i in range(QUERIES):
        t = time.perf_counter()
        model.embed([f"does vitamin d {tag}{i} reduce fracture risk"])
        times.append(time.perf_counter() - t)
    return statistics.median(times[5:]) * 1000


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    cfg = load().embedd
    texts = passages(args.n)
    model = LocalModel(cfg.threads)
    model.embed(texts[:8])
    if args.sweep:
        sample = texts[:400]
        print(f"| batch | in-process sentences/s ({len(sample)} passages, sorted, {cfg.workers} workers) |")
        print("|---|---|")
        for b in (1, 2, 4, 8, 16, 32):
            print(f"| {b} | {inproc_throughput(model, sample, b, cfg.workers):.1f} |", flush=True)
        print()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_embedd(port)
    inproc, over_http, q_http, q_in = [], [], [], []
    try:
        async with aiohttp.ClientSession() as http:
            await wait_up(http, base, proc)
            await http_throughput(http, base, texts[:16])  # warm-up
            for r in range(args.rounds):
                # Alternate slices of 200 so both paths see the same machine load.
                t_in = t_http = 0.0
                for i in range(0, len(texts), 200):
                    part = texts[i:i + 200]
                    t_in += len(part) / inproc_throughput(model, part, cfg.batch_size, cfg.workers)
                    t_http += len(part) / await http_throughput(http, base, part)
                inproc.append(len(texts) / t_in)
                over_http.append(len(texts) / t_http)
                q_in.append(inproc_query_p50(model, f"r{r}"))
                q_http.append(await http_query_p50(http, base, f"r{r}"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ip, hp = statistics.median(inproc), statistics.median(over_http)
    qi, qh = statistics.median(q_in), statistics.median(q_http)
    print(f"embedd bench: {len(texts)} SciFact passages, batch_size={cfg.batch_size}, "
          f"workers={cfg.workers}, threads={cfg.threads or 'auto'}, rounds={args.rounds}, "
          f"{CLIENTS} HTTP clients x {PER_REQUEST} texts/request")
    print("| measure | in-process | HTTP | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| throughput (sentences/s) | {ip:.1f} | {hp:.1f} | {hp / ip:.2f}x | >= 0.8x |")
    print(f"| one short query p50 (ms) | {qi:.2f} | {qh:.2f} | {qh / qi:.2f}x | HTTP <= 10 ms |")


if __name__ == "__main__":
    asyncio.run(main())
