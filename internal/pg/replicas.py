"""Searches read from PostgreSQL standbys; writes stay on the primary.

`ReplicaRouter` answers `connection()` as a `ResilientPool` does, so a search reads
through it unchanged. It checks every standby on a schedule (in recovery, replayed
position, lag against the primary's sampled position: replica_policy.py decides) and
sends a search to the standby in use while it is OK, else to the primary.

- **One target per search**: `pin()` at the start of a search picks the target and
  every statement of that search reads from it (a search never mixes two snapshots of
  different ages).
- **Read-your-writes**: a search that carries a write's `Lakehouse-LSN` reads a standby
  only once that standby has replayed it (polled for at most `replica_wait`), else the
  primary.
- **Faults**: a standby failing under a search raises `ReplicaFailed`; the caller runs
  the search again on the primary (`run`), and the standby is left out until a check
  finds it OK again. A search never fails because of a standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
import structlog
from psycopg import AsyncConnection

from internal.common.dsn import redacted
from internal.common.errors import Unavailable
from internal.pg import replica_policy as policy
from internal.pg.resilient import ResilientPool

log = structlog.get_logger()

Conn = AsyncConnection[Any]
T = TypeVar("T")

CHECK = """SELECT pg_is_in_recovery(),
       coalesce(pg_last_wal_replay_lsn(), '0/0')::text"""
PRIMARY_POSITION = "SELECT pg_current_wal_lsn()::text"
REPLAYED = "SELECT coalesce(pg_last_wal_replay_lsn(), '0/0')::text"

# The search's target (an index into the router's standbys; -1 the primary) and the
# position it must see; per asyncio task context, set by `pin`.
_target: contextvars.ContextVar[int | None] = contextvars.ContextVar("replica_target",
                                                                     default=None)


class ReplicaFailed(Unavailable):
    """A standby failed under a search: run it again on the primary."""

    code = "replica_unavailable"


class ReplicaRouter:
    """The read side of a primary and its standbys."""

    def __init__(self, primary: ResilientPool, dsns: Sequence[str], *, max_lag: float,
                 wait: float, pool_max: int, interval: float = 0.5) -> None:
        self.primary = primary
        self.max_lag = max_lag
        self.wait = wait
        self.interval = interval
        self.pools = [ResilientPool(d, 1, pool_max, timeout=2.0) for d in dsns]
        self.states = [policy.ReplicaState(redacted(d)) for d in dsns]
        self.samples = policy.PrimarySamples()
        self.current: int | None = None
        self.fallbacks = 0  # searches run again on the primary after a standby failed
        self.served = [0] * len(dsns)  # searches each standby was chosen for
        self.served_primary = 0
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Open what answers (a standby down at start is checked again later)."""
        for pool, st in zip(self.pools, self.states, strict=True):
            try:
                await pool.open(timeout=5.0)
            except Exception as exc:
                st.state, st.reason = policy.DOWN, f"unreachable at start: {type(exc).__name__}"
                pool.mark_down(None, exc)
        await self.check()
        for st in self.states:
            if st.state != policy.OK:
                log.warning("read_replica_not_used", replica=st.name, state=st.state,
                            reason=st.reason)
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for pool in self.pools:
            with contextlib.suppress(Exception):
                await pool.close()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception as exc:
                log.warning("read_replica_check_failed", error=str(exc)[:200])

    async def check(self) -> None:
        """Sample the primary's position, then judge every standby against it."""
        try:
            async with self.primary.connection() as conn:
                cur = await conn.execute(PRIMARY_POSITION)
                row = await cur.fetchone()
            if row is not None:
                self.samples.add(time.monotonic(), policy.parse_lsn(str(row[0])))
        except Unavailable:
            pass  # the primary down: standbys are judged on what was sampled
        for i, (pool, st) in enumerate(zip(self.pools, self.states, strict=True)):
            before = st.state
            reachable, in_recovery, replayed = False, None, st.replayed
            try:
                async with asyncio.timeout(2.0):
                    async with pool.connection() as conn:
                        cur = await conn.execute(CHECK)
                        row = await cur.fetchone()
                if row is not None:
                    reachable, in_recovery = True, bool(row[0])
                    replayed = policy.parse_lsn(str(row[1]))
            except (Unavailable, psycopg.Error, OSError, TimeoutError):
                pass
            st.replayed = replayed
            st.lag = self.samples.lag_seconds(replayed, time.monotonic()) if reachable else 0.0
            st.state, st.reason = policy.judge(reachable, in_recovery, st.lag, self.max_lag)
            if st.state != before and before != policy.STARTING:
                log.warning("read_replica_state", replica=st.name, state=st.state,
                            was=before, reason=st.reason)
            if st.state != policy.OK and self.current == i:
                self.current = None
        self.current = policy.choose(self.states, self.current)

    async def pin(self, min_lsn: int | None = None) -> int | None:
        """Choose this search's target (None: the primary) and keep it for its statements.

        With min_lsn, a standby serves only once it has replayed that position."""
        target = self.current
        if target is not None and min_lsn is not None:
            target = target if await self._reached(target, min_lsn) else None
        _target.set(-1 if target is None else target)
        if target is None:
            self.served_primary += 1
        else:
            self.served[target] += 1
        return target

    async def _reached(self, i: int, min_lsn: int) -> bool:
        st = self.states[i]
        if st.replayed >= min_lsn:
            return True
        deadline = time.monotonic() + self.wait
        while True:
            try:
                async with self.pools[i].connection() as conn:
                    cur = await conn.execute(REPLAYED)
                    row = await cur.fetchone()
                if row is not None:
                    st.replayed = max(st.replayed, policy.parse_lsn(str(row[0])))
            except (Unavailable, psycopg.Error, OSError):
                return False
            if st.replayed >= min_lsn:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.005)

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Conn]:
        """A connection of this search's target (the primary when none is pinned)."""
        target = _target.get()
        if target is None or target < 0:
            async with self.primary.connection(timeout) as conn:
                yield conn
            return
        try:
            async with self.pools[target].connection(timeout) as conn:
                yield conn
        except (Unavailable, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self._fail(target, exc)
            raise ReplicaFailed(f"read replica {self.states[target].name} failed: "
                                f"{type(exc).__name__}") from exc

    def _fail(self, i: int, exc: BaseException) -> None:
        st = self.states[i]
        if st.state == policy.OK:
            st.state, st.reason = policy.DOWN, f"failed under a search: {type(exc).__name__}"
            log.warning("read_replica_state", replica=st.name, state=st.state, was=policy.OK,
                        reason=st.reason)
        if self.current == i:
            self.current = policy.choose(self.states, None)

    def on_replica(self) -> bool:
        """Whether the search in this context reads a standby."""
        target = _target.get()
        return target is not None and target >= 0

    async def run(self, search: Callable[[], Awaitable[T]], min_lsn: int | None = None) -> T:
        """A search on its target; again on the primary if its standby failed or lacked
        a table the registry (read on the primary) has."""
        await self.pin(min_lsn)
        try:
            return await search()
        except (ReplicaFailed, psycopg.errors.UndefinedTable):
            if not self.on_replica():
                raise
            self.fallbacks += 1
            _target.set(-1)
            return await search()

    def status(self) -> list[dict[str, Any]]:
        """Each standby's state, lag and replayed position (/readyz, `lakehouse status`)."""
        return [{"replica": st.name, "state": st.state, "lag_seconds": round(st.lag, 3),
                 "replayed": policy.format_lsn(st.replayed), "in_use": self.current == i,
                 "searches": self.served[i],
                 **({"reason": st.reason} if st.reason else {})}
                for i, st in enumerate(self.states)]
