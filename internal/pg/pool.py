"""Async connection pools with pgvector's types registered on every connection."""

from __future__ import annotations

from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)


def make_pool(dsn: str, min_size: int, max_size: int) -> AsyncConnectionPool:
    """A closed pool; the caller opens it (await pool.open(wait=True)) in a cleanup_ctx.

    The vector extension must exist before the first connection is configured.
    """
    return AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        open=False,
        configure=_configure,
        kwargs={"autocommit": True},
    )
