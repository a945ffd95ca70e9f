"""The one benchmark lock of the machine: two benchmarks never measure at once.

Every engineer's benchmarks share the machine's two cores; a run holds
/tmp/lakehouse-bench.lock (flock) while it runs. A run started by another run that holds
it (the check runs benchmarks as child processes) finds LAKEHOUSE_BENCH_LOCKED set and
does not wait for its own parent."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator

PATH = "/tmp/lakehouse-bench.lock"
HELD = "LAKEHOUSE_BENCH_LOCKED"


@contextlib.contextmanager
def held(path: str = PATH) -> Iterator[None]:
    """The lock for the block (waits for it, saying so once)."""
    if os.environ.get(HELD) == "1":
        yield
        return
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the benchmark lock ({path})", file=sys.stderr, flush=True)
            started = time.monotonic()
            fcntl.flock(f, fcntl.LOCK_EX)
            print(f"lock taken after {time.monotonic() - started:.0f} s", file=sys.stderr)
        os.environ[HELD] = "1"
        try:
            yield
        finally:
            os.environ.pop(HELD, None)
            fcntl.flock(f, fcntl.LOCK_UN)
