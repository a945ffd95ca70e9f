"""What a scoped key and a tenant token cost: the default search through the gateway with
an admin token, a `search` key and a tenant token, interleaved request by request.

A stack with auth on (an admin token of its own), one corpus of random vectors; a
`search` key for it and tenant tokens signed with it; the same default (hybrid text)
search at concurrency 16, the credentials in turn request by request (each meets the same
load). The last row, a tenant token with a filter every row passes (`id_prefix`), is the
filtered search path, not the cost of the credential.

Target: a key's and a tenant token's p50 within 5% of the admin token's.
"""

from __future__ import annotations

import secrets
from typing import Any

import aiohttp

import lakehouse
from bench.data import vectors
from bench.harness import Run
from bench.harness.http import post, search
from bench.harness.timing import closed_loop, median, ms, pct

OPTIONS = {"items": 2000, "queries": 400, "rounds": 3}
QUICK = {"items": 500, "queries": 100, "rounds": 1}
CONCURRENCY = 16


def authorized(token: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"},
                                 connector=aiohttp.TCPConnector(limit=CONCURRENCY * 2))


async def main(run: Run) -> None:
    a = run.args
    admin = f"bench-{secrets.token_hex(16)}"
    with run.stack({"LAKEHOUSE_TOKEN": admin}) as stack:
        url = stack.gateway
        async with authorized(admin) as http:
            await vectors.random_corpus(http, url, "bench_keys", a.items)
            made = await post(http, f"{url}/v1/keys", {"name": "bench", "actions": ["search"],
                                                        "corpora": ["bench_keys"]})
        key, key_id = made["key"], made["id"]
        creds = {"admin token": admin, "search key": key,
                 "tenant token": lakehouse.tenant_token(key, key_id, corpora=["bench_keys"],
                                                        expires_in=7200),
                 "tenant + filter": lakehouse.tenant_token(key, key_id, corpora=["bench_keys"],
                                                           expires_in=7200,
                                                           filter={"id_prefix": "d"})}
        body: dict[str, Any] = {"query_text": "vector search latency", "corpora": ["bench_keys"], "k": 10}
        sessions = {n: authorized(c) for n, c in creds.items()}
        try:
            for s in sessions.values():
                await closed_loop(lambda _, s=s: search(s, url, body), range(50), CONCURRENCY)
            names = list(creds)
            turns = [names[i % len(names)] for i in range(a.rounds * a.queries * len(names))]
            lat: dict[str, list[float]] = {n: [] for n in names}

            async def one(name: str) -> None:
                lat[name].append(await ms(search(sessions[name], url, body)))

            _, wall = await closed_loop(one, turns, CONCURRENCY)
        finally:
            for s in sessions.values():
                await s.close()
    admin_p50 = median(lat["admin token"])
    run.table(f"concurrency {CONCURRENCY}, {a.items} items, {a.rounds} x {a.queries} default "
              "(hybrid text) searches per credential through the gateway, interleaved",
              ["credential", "p50 ms:.2f", "p95 ms:.2f", "p50 vs admin %:+.1f"],
              [(n, median(x), pct(x, 95), None if n == "admin token" else
                (median(x) / admin_p50 - 1) * 100) for n, x in lat.items()])
    run.say(f"QPS of all: {len(turns) / wall:.0f}")
