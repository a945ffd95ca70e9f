"""A connection pool that survives PostgreSQL going away and coming back.

psycopg_pool keeps trying to reconnect on its own, but with a back-off that doubles
without bound (1, 2, 4, ... s) and while it does, every request waits for the pool's
timeout before failing. Here:

- a failure that leaves the connection broken (the server died, restarted, or cannot
  be reached) marks PostgreSQL *down*: from then on `connection()` raises
  `Unavailable` (503 `postgres_unavailable`) at once, without waiting for the pool;
- one background task probes the server every `probe_interval` seconds with a fresh
  connection; when one succeeds it opens a new pool, swaps it in and closes the old
  one (whose connections all point at the dead server), then marks PostgreSQL up;
- any other OperationalError, and a pool wait longer than `timeout`, is a 503 too,
  without marking the server down (it answered; it was only slow or refused once).

Every caller goes through `connection()`, so a database failure is turned into an
HTTP status in this one place, not in each query function.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import structlog
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from internal.common.errors import Unavailable
from internal.pg.pool import make_pool

log = structlog.get_logger()

CODE = "postgres_unavailable"
Conn = AsyncConnection[Any]
PoolFactory = Callable[[], AsyncConnectionPool]


def unavailable(reason: str) -> Unavailable:
    return Unavailable(f"PostgreSQL unavailable: {reason}", code=CODE)


class ResilientPool:
    """One pool of connections to one server, swapped for a fresh one after an outage."""

    def __init__(self, dsn: str, min_size: int, max_size: int, *, timeout: float = 5.0,
                 probe_interval: float = 0.25, factory: PoolFactory | None = None) -> None:
        self.dsn = dsn
        self.timeout = timeout
        self.probe_interval = probe_interval
        self._factory = factory or (lambda: make_pool(self.dsn, min_size, max_size))
        self._pool = self._factory()
        self._down_since: float | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._closing = False
        self.outages = 0  # how many times the server was found down (for tests and logs)

    @property
    def pool(self) -> AsyncConnectionPool:
        """The pool in use now (a new one after each recovery)."""
        return self._pool

    @property
    def down(self) -> bool:
        return self._down_since is not None

    async def open(self, timeout: float = 30.0) -> None:
        await self._pool.open(wait=True, timeout=timeout)

    async def close(self) -> None:
        self._closing = True
        if self._recovery is not None:
            self._recovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._recovery
        await self._pool.close()

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Conn]:
        """A pooled connection; 503 postgres_unavailable at once while the server is down."""
        if self._down_since is not None:
            raise unavailable(f"down for {time.monotonic() - self._down_since:.1f}s; retrying")
        pool = self._pool
        conn: Conn | None = None
        try:
            async with pool.connection(timeout=timeout or self.timeout) as conn:
                yield conn
        except PoolTimeout:
            raise unavailable(f"no connection free within {timeout or self.timeout:g}s") from None
        except psycopg.errors.ProgramLimitExceeded:
            raise  # the request's own fault (e.g. a tsvector over 1 MB): the caller maps it
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if conn is None or conn.broken or conn.closed:
                self.mark_down(pool, exc)
            else:
                log.warning("postgres_error", error=str(exc).strip()[:300],
                            sqlstate=getattr(exc, "sqlstate", None))
            raise unavailable(type(exc).__name__) from exc

    def retarget(self, dsn: str, reason: str) -> None:
        """Use dsn from now on (the HA leader moved): the current pool is dropped, with
        any connection hung on the old leader, and a fresh one opened as after an outage."""
        self.dsn = dsn
        self.mark_down(None, RuntimeError(reason))

    def mark_down(self, pool: AsyncConnectionPool | None = None,
                  exc: BaseException | None = None) -> None:
        """Fail fast from now on and start probing (once) for the server's return."""
        if pool is not None and pool is not self._pool:
            return  # a straggler of a pool already replaced
        if self._down_since is not None or self._closing:
            return
        self._down_since = time.monotonic()
        self.outages += 1
        log.error("postgres_down", error=str(exc).strip()[:300] if exc else None)
        self._recovery = asyncio.get_running_loop().create_task(self._recover())

    async def _probe(self) -> bool:
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, connect_timeout=2,
                                                         autocommit=True)
        except (psycopg.Error, OSError):
            return False
        async with conn:
            try:
                await conn.execute("SELECT 1")
            except psycopg.Error:
                return False
        return True

    async def _recover(self) -> None:
        """Probe until the server answers, then swap in a fresh pool."""
        assert self._down_since is not None
        while not self._closing:
            if await self._probe():
                fresh = self._factory()
                try:
                    await fresh.open(wait=True, timeout=10.0)
                except (PoolTimeout, psycopg.Error, OSError) as exc:
                    log.warning("postgres_pool_reopen_failed", error=str(exc)[:200])
                    with contextlib.suppress(Exception):
                        await fresh.close()
                else:
                    old, self._pool = self._pool, fresh
                    down_for = time.monotonic() - self._down_since
                    self._down_since = None
                    self._recovery = None
                    log.info("postgres_back", down_seconds=round(down_for, 2))
                    # Connections still lent out of the old pool are closed as they return.
                    await old.close(timeout=1.0)
                    return
            await asyncio.sleep(self.probe_interval)
