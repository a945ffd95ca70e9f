"""What showing the daemons' warnings costs `lakehouse up`: two designs, one run.

A child process writes --lines request log lines (structlog's JSON, as a daemon under
load does) with a warning every 10,000, as fast as it can. The supervising process shows
the warnings either
- pipe: the child's output is a pipe; the supervisor reads it line by line, writes each
  line to the log file and parses the ones that may be warnings, or
- follow (shipped): the child writes its log file itself; the supervisor reads what was
  added every 0.5 s (internal.stack.forward.Follower) and parses only chunks holding a
  warning's marker.
Per design (median of --rounds, alternating): the supervisor's CPU seconds, the child's
wall time (how long its writes were held up) and the warnings shown.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path

from bench.harness import Run
from bench.harness.timing import rotated
from internal.stack.forward import Follower, parse

OPTIONS = {"lines": 300_000, "rounds": 3}
QUICK = {"lines": 50_000, "rounds": 2}
WRITER = """
import sys
n = int(sys.argv[1])
out = open(sys.argv[2], "ab", buffering=0) if len(sys.argv) > 2 else sys.stdout.buffer
info = (b'{"method":"POST","path":"/v1/vectors/search","status":200,"ms":1.234,'
        b'"request_id":"0123456789abcdef","event":"request","service":"vectord",'
        b'"level":"info","timestamp":"2026-11-27T12:00:00.000000Z"}\\n')
warn = (b'{"error":"x","event":"sync_failed","service":"syncd","level":"warning",'
        b'"timestamp":"2026-11-27T12:00:00.000000Z"}\\n')
for i in range(n):
    out.write(warn if i % 10000 == 0 else info)
    if out is sys.stdout.buffer:
        out.flush()
"""


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def pipe(lines: int, log: Path) -> tuple[float, float, int]:
    c, began = cpu(), time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(lines),
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    shown = 0
    with log.open("ab") as sink:
        while line := await proc.stdout.readline():
            sink.write(line)
            sink.flush()
            shown += parse(line) is not None
    await proc.wait()
    return cpu() - c, time.perf_counter() - began, shown


async def follow(lines: int, log: Path) -> tuple[float, float, int]:
    follower = Follower("child", log)
    c, began = cpu(), time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(lines), str(log))
    shown = 0
    waiting = asyncio.ensure_future(proc.wait())
    while not waiting.done():
        await asyncio.wait([waiting], timeout=0.5)
        shown += len(follower.read())
    took = time.perf_counter() - began
    shown += len(follower.read())
    follower.close()
    return cpu() - c, took, shown


def main(run: Run) -> None:
    designs = {"pipe": pipe, "follow": follow}
    got: dict[str, list[tuple[float, float, int]]] = {name: [] for name in designs}
    for r in range(run.args.rounds):
        for name in rotated(list(designs), r):
            log = run.folder / f"{name}-{r}.log"
            log.touch()
            got[name].append(asyncio.run(designs[name](run.args.lines, log)))
    run.table(f"{run.args.lines:,} log lines, a warning every 10,000; median of {run.args.rounds}",
              ["design", "supervisor CPU s:.3f", "child wall s:.3f", "warnings shown:d"],
              [(name, statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                runs[0][2]) for name, runs in got.items()])
