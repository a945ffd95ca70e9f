"""`lakehouse up` watches the embedded PostgreSQL like a daemon and restarts it when it dies.

The postmaster is not our child (pg_ctl starts it detached), so it is watched by pid:
every `interval` seconds, is the pid in postmaster.pid alive? When it is not, the
server is started again after the supervisor's back-off (0.5 s doubling to 30 s,
reset after a healthy minute). A start that fails (typically: backends of the dead
postmaster still hold its shared memory for a moment) counts as one more failure and
is retried after the next delay. The daemons are not restarted: vectord's pool
answers 503 while the server is away and reconnects by itself (internal/pg/resilient.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from internal.common import waits
from internal.stack.supervisor import Backoff

log = structlog.get_logger()


class PostgresWatch:
    """Restarts a server whenever `alive()` says it is gone, until `stopping` is set."""

    def __init__(self, alive: Callable[[], bool], restart: Callable[[], object],
                 stopping: asyncio.Event, *, backoff: Backoff | None = None,
                 interval: float = 0.25, name: str = "postgres") -> None:
        self.alive = alive
        self.restart = restart
        self.stopping = stopping
        self.backoff = backoff or Backoff()
        self.interval = interval
        self.name = name
        self.restarts = 0
        self.failures = 0

    async def _sleep(self, seconds: float) -> bool:
        """Wait, or return True at once when the stack is stopping."""
        return await waits.event(self.stopping, seconds)

    async def run(self) -> None:
        up_since = time.monotonic()
        while not await self._sleep(self.interval):
            if self.alive():  # reads postmaster.pid: microseconds, no thread needed
                if self.failures and time.monotonic() - up_since >= self.backoff.healthy:
                    self.failures = 0
                continue
            self.failures += 1
            delay = self.backoff.delay(self.failures)
            log.warning("postgres_exited", restart_in=delay, failures=self.failures)
            if await self._sleep(delay):
                return
            started = time.monotonic()
            try:
                await asyncio.to_thread(self.restart)
            except Exception as exc:  # pg_ctl failed: try again after the next delay
                log.warning("postgres_restart_failed", error=str(exc)[:300],
                            seconds=round(time.monotonic() - started, 2))
                continue
            self.restarts += 1
            up_since = time.monotonic()
            log.info("postgres_restarted", restarts=self.restarts,
                     seconds=round(time.monotonic() - started, 2))
