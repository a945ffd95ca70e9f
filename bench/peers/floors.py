"""Bare aiohttp servers run next to the real daemons, to show the floor.

Each does the one thing a benchmark measures and nothing else a daemon must do (no
validation, request ids, access log, metrics, error bodies, hit shaping), on the same
aiohttp and uvloop: whatever ratio one reaches is the best that stack can reach here.

    python -m bench.peers.floors search --dsn DSN --corpus NAME --port P
        POST /search {"query_vector": [...], "k": 10}: vectord's vector SQL, rows as JSON
    python -m bench.peers.floors proxy --upstream URL --port P
        any POST: the body sent on to URL + path, the answer relayed
    python -m bench.peers.floors answer --body FILE --port P
        any POST: the request read, FILE's bytes answered (a real search's response)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import msgspec
import numpy as np
import numpy.typing as npt
import uvloop
from aiohttp import web
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench.harness.stacks import ROOT, free_port, ready
from internal.api.vectord import Corpus
from internal.pg.pool import make_pool
from internal.vectord.storage.filters import TRUE
from internal.vectord.storage.store import SELECT_CORPUS, SET_SEARCH, vector_search_sql

JSON = "application/json"


class DirectSearch:
    """vectord's vector SQL sent straight to PostgreSQL, as vectord sends it: the HNSW
    settings set only when a pooled connection's differ (the benchmarks' direct path)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool
        self._settings: dict[int, str] = {}  # id(connection) -> ef_search last set

    async def corpus(self, name: str) -> Corpus:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_CORPUS, {"name": name})
            row = await cur.fetchone()
        if row is None:
            raise SystemExit(f"no corpus {name!r}")
        return Corpus(**row)

    async def statement(self, corpus_name: str) -> sql.Composed:
        """The unfiltered vector query of a corpus, looked up in the registry."""
        return vector_search_sql(await self.corpus(corpus_name), TRUE)

    async def run(self, stmt: sql.Composed, query: npt.NDArray[np.float32], k: int,
                  ef_search: int) -> list[dict[str, Any]]:
        ef = str(max(ef_search, k))
        async with self.pool.connection() as conn:
            if self._settings.get(id(conn)) != ef:
                await conn.execute(SET_SEARCH, (ef, "off"))
                self._settings[id(conn)] = ef
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, {"q": query, "k": k})
            return await cur.fetchall()


async def search_app(dsn: str, corpus_name: str, ef_search: int) -> web.Application:
    pool = make_pool(dsn, 1, 16)
    await pool.open(wait=True)
    direct = DirectSearch(pool)
    stmt = await direct.statement(corpus_name)

    async def search(request: web.Request) -> web.Response:
        body: dict[str, Any] = msgspec.json.decode(await request.read())
        query = np.asarray(body["query_vector"], dtype=np.float32)
        rows = await direct.run(stmt, query, int(body.get("k", 10)), ef_search)
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


@contextlib.contextmanager
def floor(kind: str, *args: str) -> Iterator[str]:
    """A floor server in a process of its own for the block: its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench.peers.floors", kind, "--port", str(port),
                             *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        ready(base, proc, "/ready")  # type: ignore[arg-type]
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


async def answer_app(body: bytes) -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type=JSON)

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    return app


async def serve(args: argparse.Namespace) -> None:
    if args.kind == "search":
        app = await search_app(args.dsn, args.corpus, args.ef_search)
    elif args.kind == "answer":
        app = await answer_app(args.answer)
    else:
        app = await proxy_app(args.upstream.rstrip("/"))
    async def ready(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/ready", ready)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port).start()
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("search", "proxy", "answer"))
    ap.add_argument("--body", default="")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dsn", default="")
    ap.add_argument("--corpus", default="")
    ap.add_argument("--ef-search", type=int, default=100)
    ap.add_argument("--upstream", default="")
    args = ap.parse_args()
    args.answer = open(args.body, "rb").read() if args.body else b""
    uvloop.install()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
