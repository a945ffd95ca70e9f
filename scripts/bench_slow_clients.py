"""Slow clients against vectord routes: are other searches still answered quickly?

Starts the whole stack (`lakehouse up`, temporary data dir, loopback ports), loads one
corpus, then measures vector searches through the gateway (concurrency 4) in
alternating rounds: without slow clients (the baseline, same run) and with N slow
clients (default 300) holding connections to vectord routes and sending their bodies
one byte a second (half with a Content-Length, half chunked; a client cut off by the
body timeout reconnects at once, so N stay connected). Prints p50/p95 per round, the
p95 ratio to the baseline, what the slow clients got back, and whether p95 <= 100 ms.

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_slow_clients.py \
        [--slow 300] [--queries 400] [--rounds 2] [--target gateway|vectord]

`--target vectord` sends the slow clients straight to vectord's port instead.
Bounded: every loop ends with its round; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import upstack  # noqa: E402
from tests.stack.load import unit  # noqa: E402

DIM = 384
CORPUS = "slowbench"


async def slow_client(host: str, port: int, path: str, chunked: bool, stop: asyncio.Event,
                      outcomes: collections.Counter[str]) -> None:
    """Keep one connection dribbling a body at 1 byte/s; reconnect when answered or cut."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            outcomes["connect_failed"] += 1
            await asyncio.sleep(1.0)
            continue
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                + ("Transfer-Encoding: chunked\r\n" if chunked else "Content-Length: 100000\r\n")
                + "\r\n")
        answer = asyncio.ensure_future(reader.read(64))
        try:
            writer.write(head.encode())
            while not stop.is_set() and not answer.done():
                writer.write(b"1\r\n \r\n" if chunked else b" ")
                await writer.drain()
                await asyncio.wait([answer], timeout=1.0)
            if answer.done():
                first = answer.result().split(b"\r\n", 1)[0].decode(errors="replace")
                outcomes[first or "closed"] += 1
        except (ConnectionError, OSError):
            outcomes["reset"] += 1
        finally:
            answer.cancel()
            writer.close()


async def measure(url: str, queries: int, concurrency: int, rng: random.Random
                  ) -> tuple[list[float], int]:
    lat: list[float] = []
    errors = 0
    todo = iter(range(queries))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        async def worker() -> None:
            nonlocal errors
            for _ in todo:
                body = {"mode": "vector", "query_vector": unit(DIM, rng), "k": 10}
                t0 = time.perf_counter()
                try:
                    async with http.post(url, json=body) as resp:
                        await resp.read()
                        ok = resp.status == 200
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    ok = False
                lat.append((time.perf_counter() - t0) * 1000)
                errors += not ok
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return lat, errors


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def run(args: argparse.Namespace) -> int:
    stack = upstack.start("lakehouse-bench-slow-", {"LAKEHOUSE_LOG_LEVEL": "warning"})
    try:
        base = stack.url
        rng = random.Random(3)
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/v1/vectors/corpora", json={"name": CORPUS, "dim": DIM}) as r:
                assert r.status == 201, await r.text()
            for start in range(0, args.items, 500):
                items = [{"id": f"d{i}", "vector": unit(DIM, rng), "text": f"document {i}"}
                         for i in range(start, min(args.items, start + 500))]
                async with http.post(f"{base}/v1/vectors/corpora/{CORPUS}/items",
                                     json={"items": items}) as r:
                    assert r.status == 200, await r.text()
        search = f"{base}/v1/vectors/corpora/{CORPUS}/search"
        if args.target == "vectord":
            port = stack.ports["VECTORD"]
        else:
            port = int(base.rsplit(":", 1)[1])
        await measure(search, 50, 4, rng)  # warm-up
        print(f"{args.items} items x {DIM}, searches through the gateway at concurrency 4; "
              f"{args.slow} slow clients -> {args.target} ({port}) at 1 byte/s\n")
        print(f"{'round':<24}{'queries':>8}{'errors':>8}{'p50 ms':>10}{'p95 ms':>10}")
        base_p95: list[float] = []
        slow_p95: list[float] = []
        outcomes: collections.Counter[str] = collections.Counter()
        for rnd in range(args.rounds):
            for with_slow in (False, True):
                stop = asyncio.Event()
                clients = []
                if with_slow:
                    clients = [asyncio.ensure_future(slow_client(
                        "127.0.0.1", port, f"/v1/vectors/corpora/{CORPUS}/{p}", i % 2 == 1,
                        stop, outcomes))
                        for i, p in zip(range(args.slow),
                                        ["search", "items"] * args.slow, strict=False)]
                    await asyncio.sleep(args.settle)
                lat, errors = await measure(search, args.queries, 4, rng)
                stop.set()
                await asyncio.gather(*clients)
                p50, p95 = statistics.median(lat), pct(lat, 95)
                (slow_p95 if with_slow else base_p95).append(p95)
                label = f"{rnd + 1}: {'with' if with_slow else 'without'} slow clients"
                print(f"{label:<24}{len(lat):>8}{errors:>8}{p50:>10.1f}{p95:>10.1f}")
        worst = max(slow_p95)
        print(f"\np95 with slow clients / without: {statistics.median(slow_p95) / statistics.median(base_p95):.2f}x")
        print(f"slow clients' answers: {dict(outcomes)}")
        print(f"target p95 <= 100 ms with {args.slow} slow clients: worst round {worst:.1f} ms -> "
              f"{'met' if worst <= 100 else 'NOT met'}")
        return 0
    finally:
        stack.stop()
        shutil.rmtree(stack.tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds for slow clients to connect")
    ap.add_argument("--target", choices=("gateway", "vectord"), default="gateway")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
