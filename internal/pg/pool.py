"""Async connection pools with pgvector's types registered on every connection."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import msgspec
import structlog
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool

log = structlog.get_logger()


def loads_json(data: bytes | str) -> Any:
    """jsonb/json columns with msgspec (~10x the stdlib); json for what msgspec refuses.

    A numeric such as 1e-400 is valid jsonb that msgspec will not turn into a float.
    """
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)


# Every statement of a search runs on one backend: PostgreSQL's parallel query would
# start two workers for the postings read of a new query over 16 corpora (a UNION ALL
# of 16 small index scans), which on two cores doubled its time (6.0 -> 11.8 ms) and
# takes cores from the searches running beside it. Concurrency comes from the pool.
# Index builds keep their own setting (max_parallel_maintenance_workers).
NO_PARALLEL_QUERY = "SET max_parallel_workers_per_gather = 0"


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)
    set_json_loads(loads_json, conn)
    await conn.execute(NO_PARALLEL_QUERY)


class _HottestFirst(deque[Any]):
    """The pool's idle connections, handed out last-in first-out.

    psycopg_pool takes idle connections from the left and returns them to the right: a
    FIFO that rotates every request through every connection, so each search lands on a
    backend whose caches went cold. Taking from the right keeps the busiest few hot
    (about 0.2 ms a search at 8 connections). Its shrinker also takes from the left and
    so closes the hottest idle connection instead of the coldest; the pool stays correct.
    tests/pg/test_pool.py pins this so a psycopg_pool upgrade cannot drop it silently.
    """

    def popleft(self) -> Any:
        return self.pop()


class HotPool(AsyncConnectionPool):
    """AsyncConnectionPool that reuses the most recently returned connection first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        idle = getattr(self, "_pool", None)
        if isinstance(idle, deque):
            self._pool = _HottestFirst(idle)
        else:  # psycopg_pool changed inside: stay correct (FIFO), say so
            log.warning("pool_lifo_unavailable", reason="psycopg_pool has no idle deque")


def make_pool(dsn: str, min_size: int, max_size: int) -> AsyncConnectionPool:
    """A closed pool; the caller opens it (await pool.open(wait=True)) in a cleanup_ctx.

    The vector extension must exist before the first connection is configured.
    """
    return HotPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        open=False,
        configure=_configure,
        kwargs={"autocommit": True},
    )
