"""waits.event keeps a cancel that comes in the same loop turn as the event.

The loop below is the shape of vectord's space upkeep and re-embedder: work, then wait
for a wake-up or a timeout. Cancelled at shutdown in the turn a write woke it, it must
end; with Python 3.11's `asyncio.wait_for` it ran on (the control case shows it, so the
test sees the difference it guards).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

from internal.common import waits


async def _cancelled_as_woken(wait: Callable[[asyncio.Event], Awaitable[object]]) -> bool:
    """Whether the upkeep-shaped loop ends when cancelled in the turn its event is set."""
    ev = asyncio.Event()

    async def upkeep() -> None:
        while True:
            await wait(ev)
            ev.clear()

    task = asyncio.create_task(upkeep())
    await asyncio.sleep(0)  # the loop is waiting
    ev.set()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=2.5)  # > 1 s: a timed-out round too
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return bool(done)


async def test_a_cancel_in_the_turn_of_the_wake_up_ends_the_loop() -> None:
    assert await _cancelled_as_woken(lambda ev: waits.event(ev, 1.0))


async def test_control_wait_for_loses_that_cancel_before_python_3_12() -> None:
    async def old(ev: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ev.wait(), 1.0)

    assert await _cancelled_as_woken(old) == (sys.version_info >= (3, 12))


async def test_event_says_whether_it_was_set() -> None:
    ev = asyncio.Event()
    assert await waits.event(ev, 0.01) is False
    ev.set()
    assert await waits.event(ev, 0.01) is True


async def test_a_cancel_lost_in_the_loops_work_ends_the_loop_at_its_wait() -> None:
    """A call of the loop's work that swallows the cancel (seen in vectord's space upkeep,
    inside a write transaction's exit) leaves `cancelling()` at 1: the next wait raises."""
    ev = asyncio.Event()
    rounds = 0

    async def swallowing_work() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)

    async def upkeep() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await swallowing_work()
            ev.set()  # woken at once, every round: no timeout ever ends it
            await waits.event(ev, 1.0)
            ev.clear()

    task = asyncio.create_task(upkeep())
    await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=2.5)
    assert done and task.cancelled() and rounds == 1
