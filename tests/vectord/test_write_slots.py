"""Writes take at most their share of vectord's pool: searches never queue behind them."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import psutil

from internal.common.priority import BULK, PRIORITY
from internal.config import Config
from internal.vectord.server import STORE, make_app
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, item, unique, unit

C = "/v1/vectors/corpora"


async def test_search_answers_while_every_write_slot_is_held(base_cfg: Config,
                                                             http: aiohttp.ClientSession) -> None:
    # A pool of 4, 2 of them for writes; a long bulk write holds both (entered here).
    app = make_app(with_section(base_cfg, "vectord", pool_min=1, pool_max=4,
                                write_connections=2, pool_timeout=1.0))
    server = await serve(app)
    base = url_of(server)
    try:
        name = unique("slots")
        assert (await call(http, "POST", f"{base}{C}", {"name": name, "dim": 8,
                                                         "language": "english"}))[0] == 201
        items = [item(i, 8) for i in range(20)]
        assert (await call(http, "POST", f"{base}{C}/{name}/items", {"items": items}))[0] == 200
        store = app[STORE]
        assert store.write_slots == 2
        async with contextlib.AsyncExitStack() as held:
            for _ in range(store.write_slots):
                await held.enter_async_context(store.write_connection())
            upsert = asyncio.create_task(call(http, "POST", f"{base}{C}/{name}/items",
                                              {"items": [item(99, 8)]}))
            for body in ({"mode": "vector", "query_vector": unit(8, 3), "k": 5},
                         {"mode": "lexical", "query_text": "document", "k": 5},
                         {"mode": "hybrid", "query_text": "document",
                          "query_vector": unit(8, 3), "k": 5}):
                status, out = await call(http, "POST", f"{base}{C}/{name}/search", body)
                assert status == 200 and out["hits"], out
            await asyncio.sleep(0.2)
            assert not upsert.done()  # the write waits for a write slot, not a search
        status, _ = await upsert  # and goes through once one is free
        assert status == 200
    finally:
        await server.close()


async def test_a_write_connections_backend_runs_lower_while_it_writes(base_cfg: Config) -> None:
    """The embedded PostgreSQL is reached over a Unix socket: while a connection is lent
    to a write its backend runs at `write_nice`, and it is back at 0 before any search
    can take it (the tests run as root, who may raise it back)."""
    app = make_app(with_section(base_cfg, "vectord", pool_min=1, pool_max=2,
                                write_connections=1, write_nice=7))
    server = await serve(app)
    try:
        store = app[STORE]
        assert store.write_nice.on
        async with store.write_connection() as conn:
            pid = conn.info.backend_pid
            assert psutil.Process(pid).nice() == 7
            await conn.execute("SELECT 1")
        assert psutil.Process(pid).nice() == 0
        async with store.pool.connection() as conn:  # a search's connection: untouched
            assert psutil.Process(conn.info.backend_pid).nice() == 0
    finally:
        await server.close()


async def test_the_services_bulk_searches_read_at_the_writes_priority(base_cfg: Config) -> None:
    """A search marked bulk (the learned ranker's training: Lakehouse-Priority: bulk) reads
    through a backend at `write_nice`, without taking a write slot; any other search's
    backend is untouched."""
    app = make_app(with_section(base_cfg, "vectord", pool_min=1, pool_max=2,
                                write_connections=1, write_nice=7))
    server = await serve(app)
    try:
        store = app[STORE]
        token = PRIORITY.set(BULK)
        try:
            async with store.write_connection(), store.reads.connection() as conn:
                pid = conn.info.backend_pid
                assert psutil.Process(pid).nice() == 7  # the write slot held: not needed
        finally:
            PRIORITY.reset(token)
        assert psutil.Process(pid).nice() == 0
        async with store.reads.connection() as conn:
            assert psutil.Process(conn.info.backend_pid).nice() == 0
    finally:
        await server.close()
