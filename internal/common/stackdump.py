"""What a daemon is waiting on, on request: SIGUSR1 logs every asyncio task's stack and
every thread's frames.

The supervisor sends it to a daemon that outlives its stop grace, just before SIGKILL,
so a shutdown that hangs leaves in the daemon's log where it hung (a task awaiting, or a
thread the executor's shutdown waits for) instead of only "killed after grace".
"""

from __future__ import annotations

import asyncio
import io
import signal
import sys
import traceback

import structlog

log = structlog.get_logger()

SIGNAL = signal.SIGUSR1


def dump() -> None:
    """Log each task's stack and each thread's frames, one line each."""
    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        log.warning("task_stack", task=task.get_name(), stack=out.getvalue())
    for ident, frame in sys._current_frames().items():
        log.warning("thread_stack", thread=ident, stack="".join(traceback.format_stack(frame)))


async def install(_app: object) -> None:
    """An aiohttp on_startup hook: SIGUSR1 dumps, from inside the running loop."""
    asyncio.get_running_loop().add_signal_handler(SIGNAL, dump)
