"""The sync ticker: runs on a fixed cadence, never overlapping, surviving any failure."""

from __future__ import annotations

import asyncio
import math
import time

import structlog

from internal.syncd.runner import Syncer

log = structlog.get_logger()


def next_tick(started: float, finished: float, interval: float) -> float:
    """The first tick of the cadence after the run ended.

    Ticks are `started + k * interval`; a run that outlasts the interval delays the
    next run to the first tick after it finished (missed ticks are skipped, not queued).
    """
    elapsed = max(0.0, finished - started)
    return started + interval * max(1, math.ceil(elapsed / interval))


class Ticker:
    def __init__(self, syncer: Syncer, interval: float, run_on_start: bool = True) -> None:
        self.syncer = syncer
        self.interval = interval
        self.next_run_at = time.time() + (0.0 if run_on_start else interval)

    async def loop(self) -> None:
        """Run forever (until cancelled); one bad run is logged and the cadence goes on."""
        while True:
            await asyncio.sleep(max(0.0, self.next_run_at - time.time()))
            started = time.time()
            try:
                await self.syncer.request_run()
            except asyncio.CancelledError:
                raise
            except Exception:  # the ticker must survive anything one run throws
                log.exception("sync_tick_crashed")
            self.next_run_at = next_tick(started, time.time(), self.interval)
