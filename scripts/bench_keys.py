"""What a scoped key and a tenant token cost: the default search through the gateway with
an admin token, a `search` key, a tenant token, alternating in one run.

Starts the stack with auth on (`lakehouse up`, temporary data dir), loads one corpus as
scripts/bench_gateway.py does, creates a `search` key for it and signs tenant tokens with
it, then sends the same default (hybrid text) search at concurrency 16 with the
credentials interleaved request by request (each meets the same load). Prints p50/p95
per credential, each p50's ratio to the admin token's (target: within 5%) and the QPS of
all. The last row, a tenant token with a filter every
row passes (`id_prefix`), is the filtered search path, not the cost of the credential.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_keys.py [--items 2000] [--queries 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakehouse  # noqa: E402
from scripts.bench_gateway import CONCURRENCY, load, run, searches, start_stack  # noqa: E402


async def interleaved(sessions: dict[str, aiohttp.ClientSession], url: str,
                      body: dict[str, Any], per_credential: int
                      ) -> tuple[dict[str, list[float]], float]:
    """`per_credential` searches with each credential at CONCURRENCY, the credentials in
    turn request by request (every one meets the same load at the same time): latencies
    (ms) per credential and the wall time (s) of all."""
    names = list(sessions)
    todo = [names[i % len(names)] for i in range(per_credential * len(names))]
    todo.reverse()
    lat: dict[str, list[float]] = {n: [] for n in names}

    async def worker() -> None:
        while todo:
            n = todo.pop()
            t0 = time.perf_counter()
            async with sessions[n].post(f"{url}/v1/matrix/search", json=body) as r:
                await r.read()
                assert r.status == 200, (n, r.status)
            lat[n].append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return lat, time.perf_counter() - t0


async def main_async(args: argparse.Namespace, url: str, admin: str) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"},
                                     connector=aiohttp.TCPConnector(limit=CONCURRENCY * 2)
                                     ) as session:
        corpus = "bench_keys"
        await load(session, url, corpus, args.items)
        async with session.post(f"{url}/v1/keys", json={
                "name": "bench", "actions": ["search"], "corpora": [corpus]}) as r:
            assert r.status == 201, await r.text()
            created = await r.json()
        key, key_id = created["key"], created["id"]
        creds = {
            "admin token": admin,
            "search key": key,
            "tenant token": lakehouse.tenant_token(key, key_id, corpora=[corpus],
                                                   expires_in=7200),
            "tenant + filter": lakehouse.tenant_token(key, key_id, corpora=[corpus],
                                                      expires_in=7200, filter={"id_prefix": "d"}),
        }
        body: dict[str, Any] = searches(corpus)["text (hybrid)"]
        names = list(creds)
        sessions = {n: aiohttp.ClientSession(headers={"Authorization": f"Bearer {c}"},
                                             connector=aiohttp.TCPConnector(limit=CONCURRENCY * 2))
                    for n, c in creds.items()}
        try:
            for n in names:
                await run(sessions[n], url, body, 50)  # warm-up (run adds the path)
            lat, wall = await interleaved(sessions, url, body, args.rounds * args.queries)
        finally:
            for s in sessions.values():
                await s.close()
        print(f"\nconcurrency {CONCURRENCY}, {args.items} items, {args.rounds} x {args.queries} "
              "default (hybrid text) searches per credential, through the gateway, the "
              "credentials interleaved request by request\n")
        print("| credential      | p50 ms | p95 ms | p50 vs admin |")
        print("|-----------------|-------:|-------:|-------------:|")
        base = statistics.median(lat[names[0]])
        for n in names:
            xs = sorted(lat[n])
            p50 = statistics.median(xs)
            ratio = "" if n == names[0] else f"{(p50 / base - 1) * 100:+.1f}%"
            print(f"| {n:<15} | {p50:6.2f} | {xs[int(len(xs) * 0.95) - 1]:6.2f} | {ratio:>12} |")
        print(f"QPS of all: {sum(len(xs) for xs in lat.values()) / wall:.0f}")
        print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")
        print("target: a key's and a tenant token's p50 within 5% of the admin token's")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    admin = f"bench-{secrets.token_hex(16)}"
    os.environ["LAKEHOUSE_TOKEN"] = admin
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-keys-"))
    proc, urls = start_stack(tmp)
    try:
        asyncio.run(main_async(args, urls["gateway"], admin))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
