"""What showing the daemons' warnings costs `lakehouse up`: two designs, one run.

A child process writes `--lines` request log lines (structlog's JSON, as a daemon under
load does) with a warning every 10,000, as fast as it can. The supervising process shows
the warnings either
- pipe: the child's output is a pipe; the supervisor reads it line by line, writes each
  line to the log file and parses the ones that may be warnings (the --verbose path's
  reading, plus the filter), or
- follow (shipped): the child writes its log file itself; the supervisor reads what was
  added every 0.5 s (internal.stack.forward.Follower) and parses only chunks holding a
  warning's marker.
Prints, per design (median of --rounds, alternating), the supervisor's CPU seconds, the
child's wall time (how long its writes were held up) and the warnings shown.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_forward.py [--lines 300000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from internal.stack.forward import Follower, parse  # noqa: E402

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


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def pipe(lines: int, log: Path) -> tuple[float, float, int]:
    cpu, began = _cpu(), time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(lines),
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    shown = 0
    with log.open("ab") as sink:
        while line := await proc.stdout.readline():
            sink.write(line)
            sink.flush()
            if parse(line) is not None:
                shown += 1
    await proc.wait()
    return _cpu() - cpu, time.perf_counter() - began, shown


async def follow(lines: int, log: Path) -> tuple[float, float, int]:
    follower = Follower("child", log)
    cpu, began = _cpu(), time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(lines),
                                                str(log))
    shown = 0
    waiting = asyncio.ensure_future(proc.wait())
    while not waiting.done():
        await asyncio.wait([waiting], timeout=0.5)
        shown += len(follower.read())
    took = time.perf_counter() - began
    shown += len(follower.read())
    follower.close()
    return _cpu() - cpu, took, shown


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    designs = {"pipe": pipe, "follow": follow}
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in designs}
    with tempfile.TemporaryDirectory(prefix="lakehouse-forward-") as folder:
        for r in range(args.rounds):
            names = list(designs)[r % 2:] + list(designs)[:r % 2]
            for name in names:
                log = Path(folder) / f"{name}-{r}.log"
                log.touch()
                results[name].append(asyncio.run(designs[name](args.lines, log)))
    print(f"{args.lines:,} log lines, a warning every 10,000; median of {args.rounds}")
    for name, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        print(f"{name:<7} supervisor CPU {cpu:6.3f} s  child wall {wall:6.3f} s  "
              f"warnings shown {runs[0][2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
