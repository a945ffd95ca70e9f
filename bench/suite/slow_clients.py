"""Slow clients against vectord routes: are other searches still answered quickly?

A stack with one corpus; vector searches through the gateway (concurrency 4) in
alternating rounds: without slow clients (the baseline, same run) and with N slow clients
(--slow) holding connections to vectord routes and sending their bodies one byte a second
(half with a Content-Length, half chunked; a client cut off by the body timeout reconnects
at once, so N stay connected). p50/p95 per round, the p95 ratio, what the slow clients got
back. --target vectord sends the slow clients straight to vectord's port.

Target: p95 <= 100 ms with the slow clients.
"""

from __future__ import annotations

import asyncio
import collections
import statistics

import aiohttp
import numpy as np

from bench.data import vectors
from bench.harness import Run
from bench.harness.http import CORPORA
from bench.harness.timing import closed_loop, pct

OPTIONS = {"slow": 300, "items": 2000, "queries": 400, "rounds": 2,
           "settle": (3.0, "seconds for slow clients to connect"), "target": ("gateway", "or vectord")}
QUICK = {"slow": 100, "queries": 100, "rounds": 1}
CORPUS = "slowbench"


async def slow_client(port: int, path: str, chunked: bool, stop: asyncio.Event,
                      outcomes: collections.Counter[str]) -> None:
    """Keep one connection dribbling a body at 1 byte/s; reconnect when answered or cut."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            outcomes["connect_failed"] += 1
            await asyncio.sleep(1.0)
            continue
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
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
                outcomes[answer.result().split(b"\r\n", 1)[0].decode(errors="replace") or "closed"] += 1
        except (ConnectionError, OSError):
            outcomes["reset"] += 1
        finally:
            answer.cancel()
            writer.close()


async def main(run: Run) -> None:
    a = run.args
    rng = np.random.default_rng(3)
    with run.stack() as stack:
        base = stack.gateway
        url = f"{base}{CORPORA}/{CORPUS}/search"
        port = stack.ports["VECTORD"] if a.target == "vectord" else int(base.rsplit(":", 1)[1])
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            await vectors.random_corpus(http, base, CORPUS, a.items, seed=3)

            errors = collections.Counter()  # type: ignore[var-annotated]

            async def one(rnd: int) -> None:
                body = {"mode": "vector", "k": 10, "query_vector": vectors.unit(1, 384, rng)[0].tolist()}
                try:
                    async with http.post(url, json=body) as r:
                        await r.read()
                        errors[rnd] += r.status != 200
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    errors[rnd] += 1

            await closed_loop(one, [-1] * 50, 4)  # warm-up
            rows, p95s = [], {False: [], True: []}  # type: ignore[var-annotated]
            outcomes: collections.Counter[str] = collections.Counter()
            for rnd in range(a.rounds):
                for with_slow in (False, True):
                    stop = asyncio.Event()
                    clients = [asyncio.ensure_future(slow_client(
                        port, f"{CORPORA}/{CORPUS}/{('search', 'items')[i % 2]}", i % 2 == 1,
                        stop, outcomes)) for i in range(a.slow if with_slow else 0)]
                    if with_slow:
                        await asyncio.sleep(a.settle)
                    lat, _ = await closed_loop(one, [rnd * 2 + with_slow] * a.queries, 4)
                    stop.set()
                    await asyncio.gather(*clients)
                    p95s[with_slow].append(pct(lat, 95))
                    rows.append((f"{rnd + 1}: {'with' if with_slow else 'without'} slow clients",
                                 len(lat), errors[rnd * 2 + with_slow], statistics.median(lat),
                                 pct(lat, 95)))
    run.table(f"{a.items} items x 384, vector searches through the gateway at concurrency 4; "
              f"{a.slow} slow clients -> {a.target} ({port}) at 1 byte/s",
              ["round", "queries:d", "errors:d", "p50 ms:.1f", "p95 ms:.1f"], rows)
    ratio = statistics.median(p95s[True]) / statistics.median(p95s[False])
    run.say(f"p95 with slow clients / without: {ratio:.2f}x", slow_p95_ratio=ratio)
    run.say(f"slow clients' answers: {dict(outcomes)}")
    worst = max(p95s[True])
    run.say(f"target p95 <= 100 ms with {a.slow} slow clients: worst round {worst:.1f} ms -> "
            f"{'met' if worst <= 100 else 'NOT met'}")
