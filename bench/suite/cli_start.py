"""How fast the `lakehouse` command answers: `lakehouse --help` and `lakehouse corpora`
against a running stack, wall time of the whole process, median of --runs runs.

A stack of this checkout (or --url's). Each round runs, one after the other, the
interpreter alone (`python -c pass`, the floor no command can beat), this checkout's
`lakehouse --help` and `lakehouse corpora`, and with --baseline the same two commands of
the baseline's .venv, so every command sees the same machine load.

Target: <= 0.3 s for both commands.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time

from bench.harness import Run

OPTIONS = {"runs": 10, "token": ""}
QUICK = {"runs": 3}
TARGET_S = 0.3


def wall(argv: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started


def main(run: Run) -> None:
    with run.stack() as stack:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        env.update(LAKEHOUSE_URL=stack.gateway, LAKEHOUSE_TOKEN=run.args.token,
                   LAKEHOUSE_STATE_DIR=str(run.folder / "state"))
        here = run.root / ".venv" / "bin"
        runs = {"python -c pass (floor)": [str(here / "python"), "-c", "pass"],
                "lakehouse --help": [str(here / "lakehouse"), "--help"],
                "lakehouse corpora": [str(here / "lakehouse"), "corpora"]}
        if run.baseline is not None:
            there = run.baseline / ".venv" / "bin"
            runs["baseline: lakehouse --help"] = [str(there / "lakehouse"), "--help"]
            runs["baseline: lakehouse corpora"] = [str(there / "lakehouse"), "corpora"]
        times: dict[str, list[float]] = {name: [] for name in runs}
        for argv in runs.values():
            wall(argv, env, str(run.root))  # warm the page cache and the bytecode of every side
        for _ in range(run.args.runs):
            for name, argv in runs.items():
                times[name].append(wall(argv, env, str(run.root)))
    floor = statistics.median(times["python -c pass (floor)"])
    rows = []
    for name, got in times.items():
        med = statistics.median(got)
        base = times.get(f"baseline: {name}")
        rows.append((name, med, max(got), med / floor,
                     ("met" if med <= TARGET_S else "NOT met") if name.startswith("lakehouse") else "",
                     statistics.median(base) / med if base else None))
    run.table(f"{run.args.runs} runs each, alternating; target <= {TARGET_S} s",
              ["command", "median s:.3f", "max s:.3f", "x floor:.1f", "target",
               "x faster than baseline:.1f"], rows)
