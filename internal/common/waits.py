"""Waiting for an event at most so long, without ever losing a cancel.

Python 3.11's `asyncio.wait_for(event.wait(), t)` returns the event's result when a
cancel and the event come in the same turn of the loop, and the cancel is gone
(CPython gh-86296, fixed in 3.12 by building wait_for on `asyncio.timeout`). A
background loop of the form "work, then wait for a wake-up or a timeout" then runs on
after its task was cancelled, and whoever awaits that task at shutdown waits forever:
vectord's space upkeep, woken by every write, hung that way under load until the
supervisor killed it after its stop grace. `asyncio.timeout` (3.11) keeps the cancel.

A cancel can also be lost in the loop's work before the wait: vectord's space upkeep was
seen to run on with `Task.cancelling()` at 1 after a cancel that came while a write
transaction of `apply_pending` ended (psycopg's connection and transaction exits await
in their cleanup), and its shutdown waited forever. So a wait in a task with a cancel
pending raises the cancel instead of waiting: every loop that waits here ends.
"""

from __future__ import annotations

import asyncio
import contextlib


async def event(ev: asyncio.Event, seconds: float) -> bool:
    """Wait until `ev` is set or `seconds` pass: True when set. A cancel always raises,
    a pending one (requested earlier, lost on the way) too."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    try:
        async with asyncio.timeout(seconds):
            await ev.wait()
    except TimeoutError:
        return ev.is_set()
    return True


async def stop(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
