"""What MCP costs: one search as an MCP tool call and as the plain HTTP route.

One corpus of random 384-d vectors with short texts in a stack; the same hybrid text
search one at a time, in alternating rounds: straight to the gateway's POST
/v1/matrix/search, and as the `search` tool through the gateway's /mcp with the SDK's own
streamable-HTTP client (gateway -> mcpd -> gateway -> matrixd: one hop more, plus JSON-RPC
and the text rendering). p50/p95 per path and the ratio of the p50s.
"""

from __future__ import annotations

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.data import vectors
from bench.harness import Run
from bench.harness.http import search, session
from bench.harness.timing import alternated, median, one_at_a_time, pct

OPTIONS = {"items": 2000, "queries": 200, "rounds": 3}
QUICK = {"items": 500, "queries": 60, "rounds": 2}
QUERIES = ["vector search latency", "tea by the river", "postgres embedding model",
           "hybrid rank fusion", "bicycle gateway throughput"]


async def main(run: Run) -> None:
    a = run.args
    with run.stack() as stack:
        url = stack.gateway
        async with session() as http, \
                httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as client, \
                streamable_http_client(f"{url}/mcp", http_client=client) as (read, write), \
                ClientSession(read, write) as mcp:
            await mcp.initialize()
            await vectors.random_corpus(http, url, "bench_mcp", a.items)

            async def direct(i: int) -> None:
                await search(http, url, {"query_text": QUERIES[i % len(QUERIES)],
                                         "corpora": ["bench_mcp"], "k": 10})

            async def via_mcp(i: int) -> None:
                result = await mcp.call_tool("search", {"query": QUERIES[i % len(QUERIES)],
                                                        "corpora": ["bench_mcp"], "k": 10})
                assert not result.is_error, result.content

            paths = {"POST /v1/matrix/search": direct, "MCP tools/call search through /mcp": via_mcp}
            for fn in paths.values():
                await one_at_a_time(fn, range(20))  # warm-up
            lat: dict[str, list[float]] = {p: [] for p in paths}
            for rnd in range(a.rounds):
                for path in alternated(list(paths), rnd):
                    lat[path] += await one_at_a_time(paths[path], range(a.queries))
    http_p50, mcp_p50 = (median(x) for x in lat.values())
    run.table(f"{a.items} items, {a.rounds} x {a.queries} sequential hybrid searches a path",
              ["path", "p50 ms:.2f", "p95 ms:.2f"],
              [(p, median(x), pct(x, 95)) for p, x in lat.items()])
    run.say(f"MCP / HTTP p50: {mcp_p50 / http_p50:.2f}x (+{mcp_p50 - http_p50:.2f} ms a call)",
            mcp_http_p50_ratio=mcp_p50 / http_p50)
