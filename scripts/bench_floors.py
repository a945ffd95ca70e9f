"""Bare aiohttp servers the benchmarks run next to the real daemons, to show the floor.

Each does the one thing a benchmark measures and nothing else a daemon must do (no
validation, request ids, access log, metrics, error bodies, hit shaping), on the same
aiohttp and uvloop. Whatever ratio one of them reaches is the best that stack can reach
on this machine; the benchmark prints it next to the daemon's.

    python scripts/bench_floors.py search --dsn DSN --corpus NAME --port P
        POST /search {"query_vector": [...], "k": 10}: vectord's vector SQL, rows as JSON
    python scripts/bench_floors.py proxy --upstream URL --port P
        any POST: the body sent on to URL + path, the answer relayed
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import numpy as np
import uvloop
from aiohttp import web
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from internal.pg.pool import make_pool
from internal.vectord.filters import TRUE
from internal.vectord.models import Corpus
from internal.vectord.store import SELECT_CORPUS, SET_SEARCH, vector_search_sql

JSON = "application/json"


async def search_app(dsn: str, corpus_name: str, ef_search: int) -> web.Application:
    pool = make_pool(dsn, 1, 16)
    await pool.open(wait=True)
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(SELECT_CORPUS, {"name": corpus_name})
        row = await cur.fetchone()
        if row is None:
            raise SystemExit(f"no corpus {corpus_name!r}")
        corpus = Corpus(**row)
    stmt = vector_search_sql(corpus, TRUE)
    ready: set[int] = set()

    async def search(request: web.Request) -> web.Response:
        body: dict[str, Any] = msgspec.json.decode(await request.read())
        query = np.asarray(body["query_vector"], dtype=np.float32)
        async with pool.connection() as conn:
            if id(conn) not in ready:
                await conn.execute(SET_SEARCH, (str(ef_search), "off"))
                ready.add(id(conn))
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, {"q": query, "k": int(body.get("k", 10))})
            rows = await cur.fetchall()
        return web.Response(body=msgspec.json.encode({"hits": rows}), content_type=JSON)

    app = web.Application()
    app.router.add_post("/search", search)
    return app


async def proxy_app(upstream: str) -> web.Application:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                    auto_decompress=False)

    async def relay(request: web.Request) -> web.Response:
        async with session.post(upstream + request.path_qs, data=await request.read(),
                                headers={"Content-Type": JSON}) as r:
            return web.Response(body=await r.read(), status=r.status, content_type=JSON)

    app = web.Application()
    app.router.add_post("/{tail:.*}", relay)
    return app


async def serve(args: argparse.Namespace) -> None:
    if args.kind == "search":
        app = await search_app(args.dsn, args.corpus, args.ef_search)
    else:
        app = await proxy_app(args.upstream.rstrip("/"))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port).start()
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("search", "proxy"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dsn", default="")
    ap.add_argument("--corpus", default="")
    ap.add_argument("--ef-search", type=int, default=100)
    ap.add_argument("--upstream", default="")
    args = ap.parse_args()
    uvloop.install()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
