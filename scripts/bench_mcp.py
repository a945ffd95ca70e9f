"""Benchmark what MCP costs: one search as an MCP tool call and as the plain HTTP route.

Starts the whole stack with `lakehouse up` (scripts/bench_gateway.py's start_stack: free
loopback ports, temporary data dir), loads one corpus of random 384-d vectors with short
texts, then sends the same hybrid text search one at a time, in alternating rounds:
straight to the gateway's POST /v1/matrix/search, and as the `search` tool through the
gateway's /mcp with the SDK's own streamable-HTTP client (gateway -> mcpd -> gateway ->
matrixd: one hop more, plus JSON-RPC and the text rendering). Prints p50/p95 per path and
the ratio of the p50s, measured in the same run.

    .venv/bin/python scripts/bench_mcp.py [--items 2000] [--queries 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gateway import load, start_stack

QUERIES = ["vector search latency", "tea by the river", "postgres embedding model",
           "hybrid rank fusion", "bicycle gateway throughput"]


async def direct(session: aiohttp.ClientSession, url: str, corpus: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        body = {"query_text": QUERIES[i % len(QUERIES)], "corpora": [corpus], "k": 10}
        t0 = time.perf_counter()
        async with session.post(f"{url}/v1/matrix/search", json=body) as r:
            await r.read()
            assert r.status == 200, r.status
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def via_mcp(mcp: ClientSession, corpus: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        result = await mcp.call_tool("search", {"query": QUERIES[i % len(QUERIES)], "corpora": [corpus], "k": 10})
        assert not result.is_error, result.content
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def main_async(args: argparse.Namespace, url: str) -> None:
    corpus = "bench_mcp"
    async with aiohttp.ClientSession() as session, \
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as client, \
            streamable_http_client(f"{url}/mcp", http_client=client) as (read, write), \
            ClientSession(read, write) as mcp:
        await mcp.initialize()
        await load(session, url, corpus, args.items)
        await direct(session, url, corpus, 20)  # warm-up
        await via_mcp(mcp, corpus, 20)
        lat: dict[str, list[float]] = {"http": [], "mcp": []}
        for rnd in range(args.rounds):
            for path in (("http", "mcp") if rnd % 2 == 0 else ("mcp", "http")):
                if path == "http":
                    lat[path] += await direct(session, url, corpus, args.queries)
                else:
                    lat[path] += await via_mcp(mcp, corpus, args.queries)
    p50 = {k: statistics.median(v) for k, v in lat.items()}
    p95 = {k: sorted(v)[int(len(v) * 0.95) - 1] for k, v in lat.items()}
    print(f"\n{args.items} items, {args.rounds} x {args.queries} sequential hybrid searches per path\n")
    print("| path                                  | p50 ms | p95 ms |")
    print("|---------------------------------------|-------:|-------:|")
    print(f"| POST /v1/matrix/search (baseline)     | {p50['http']:6.2f} | {p95['http']:6.2f} |")
    print(f"| MCP tools/call search through /mcp    | {p50['mcp']:6.2f} | {p95['mcp']:6.2f} |")
    print(f"\nMCP / HTTP p50: {p50['mcp'] / p50['http']:.2f}x (+{p50['mcp'] - p50['http']:.2f} ms a call)")
    print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-mcp-"))
    proc, urls = start_stack(tmp)
    try:
        asyncio.run(main_async(args, urls["gateway"]))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
