"""The sync ticker: runs on a fixed cadence, never overlapping, surviving any failure.

Its first run waits for the daemons a run needs (embedd loads its model after the stack
starts), and a run that the stack failed (a daemon unreachable, busy or slow) is tried
again within seconds, with back-off, instead of one `interval` later.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

import structlog

from internal.syncd.runner import Syncer

log = structlog.get_logger()

RETRY_FIRST = 1.0    # seconds before the first try again of a run the stack failed
RETRY_CAP = 60.0     # the back-off's ceiling (and never past the interval)
START_WAIT = 120.0   # the first run waits at most this long for its daemons, then runs
POLL = 0.5           # seconds between two looks at the daemons while waiting

# The daemons a run needs that do not answer yet (none: an empty list).
Probe = Callable[[], Awaitable[list[str]]]


def next_tick(started: float, finished: float, interval: float) -> float:
    """The first tick of the cadence after the run ended.

    Ticks are `started + k * interval`; a run that outlasts the interval delays the
    next run to the first tick after it finished (missed ticks are skipped, not queued).
    """
    elapsed = max(0.0, finished - started)
    return started + interval * max(1, math.ceil(elapsed / interval))


def retry_delay(failures: int, interval: float) -> float:
    """Seconds before the next try after `failures` runs in a row that the stack failed:
    1, 2, 4 … up to a minute, and never later than the cadence would run anyway."""
    return float(min(interval, RETRY_CAP, RETRY_FIRST * 2 ** max(0, failures - 1)))


class Ticker:
    def __init__(self, syncer: Syncer, interval: float, run_on_start: bool = True,
                 probe: Probe | None = None, start_wait: float = START_WAIT) -> None:
        self.syncer = syncer
        self.interval = interval
        self.run_on_start = run_on_start
        self.probe = probe
        self.start_wait = start_wait
        self.failures = 0  # runs in a row that the stack failed
        self.next_run_at = time.time() + (0.0 if run_on_start else interval)

    async def wait_for_daemons(self) -> None:
        """Until every daemon a run needs answers, or `start_wait` has passed (then the
        run goes anyway, and its failure is reported as any other)."""
        if self.probe is None:
            return
        deadline = time.monotonic() + self.start_wait
        told = False
        while True:
            missing = await self.probe()
            if not missing:
                return
            if time.monotonic() >= deadline:
                log.info("sync_wait_over", waiting_for=missing, seconds=self.start_wait)
                return
            if not told:
                log.info("sync_waiting", waiting_for=missing)
                told = True
            await asyncio.sleep(POLL)

    async def loop(self) -> None:
        """Run forever (until cancelled); one bad run is logged and the cadence goes on."""
        if self.run_on_start:
            await self.wait_for_daemons()
        while True:
            await asyncio.sleep(max(0.0, self.next_run_at - time.time()))
            started = time.time()
            transient = False
            try:
                transient = (await self.syncer.request_run()).transient
            except asyncio.CancelledError:
                raise
            except Exception:  # the ticker must survive anything one run throws
                log.exception("sync_tick_crashed")
            if transient:
                self.failures += 1
                delay = retry_delay(self.failures, self.interval)
                self.next_run_at = time.time() + delay
                log.info("sync_retry", failures=self.failures, in_seconds=delay)
            else:
                self.failures = 0
                self.next_run_at = next_tick(started, time.time(), self.interval)
