"""The one benchmark lock of the machine: two benchmarks never measure at once.

Every engineer's benchmarks share the machine's two cores; a run holds
/tmp/lakehouse-bench.lock (flock) while it runs. A run started by a process that holds it
(the check runs benchmarks as child processes) finds LAKEHOUSE_BENCH_LOCK=held in its
environment and does not wait for its own parent. A long run may let others go between
its preparation and its measurement (`between`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from typing import IO

PATH = "/tmp/lakehouse-bench.lock"
ENV, HELD = "LAKEHOUSE_BENCH_LOCK", "held"


class Lock:
    def __init__(self, path: str = PATH) -> None:
        self.path = path
        self.file: IO[str] | None = None
        self.inherited = os.environ.get(ENV) == HELD

    def take(self) -> None:
        if self.inherited:
            return
        self.file = f = open(self.path, "a+")  # held across calls
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the benchmark lock ({self.path})", file=sys.stderr, flush=True)
            started = time.monotonic()
            fcntl.flock(f, fcntl.LOCK_EX)
            print(f"lock taken after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        os.environ[ENV] = HELD  # for the children this run starts

    def release(self) -> None:
        if self.inherited or self.file is None:
            return
        os.environ.pop(ENV, None)
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()
        self.file = None


@contextlib.contextmanager
def held(lock: Lock) -> Iterator[Lock]:
    lock.take()
    try:
        yield lock
    finally:
        lock.release()
