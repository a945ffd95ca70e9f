"""How fast the `lakehouse` command answers: `lakehouse --help` and `lakehouse corpora`
against a running stack, wall time of the whole process, median of N runs.

Starts a stack of this checkout (`lakehouse up` on free ports, scripts/bench_gateway.py's
start_stack) unless --url names one. In each round it runs, one after the other, the
interpreter alone (`python -c pass`, the floor no command can beat), this checkout's
`lakehouse --help` and `lakehouse corpora`, and with --baseline DIR the same two commands
of DIR's .venv (e.g. the previous main), so every command sees the same machine load.
Target: <= 0.3 s for both commands.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \
        .venv/bin/python scripts/bench_cli_start.py [--runs 10] [--baseline ../main]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_client_install import stack_url  # noqa: E402

TARGET_S = 0.3


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--url", help="a running stack (default: start one)")
    ap.add_argument("--token", default="")
    ap.add_argument("--baseline", type=Path, help="another checkout with its own .venv")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lakehouse-cli-start-",
                                     ignore_cleanup_errors=True) as folder, \
            stack_url(args.url, Path(folder)) as url:
        tmp, token = Path(folder), args.token
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        env.update(LAKEHOUSE_URL=url, LAKEHOUSE_TOKEN=token,
                   LAKEHOUSE_STATE_DIR=str(tmp / "state"))
        here = ROOT / ".venv" / "bin"
        runs: dict[str, list[str]] = {
            "python -c pass (floor)": [str(here / "python"), "-c", "pass"],
            "lakehouse --help": [str(here / "lakehouse"), "--help"],
            "lakehouse corpora": [str(here / "lakehouse"), "corpora"],
        }
        if args.baseline is not None:
            there = args.baseline.resolve() / ".venv" / "bin"
            runs["baseline: lakehouse --help"] = [str(there / "lakehouse"), "--help"]
            runs["baseline: lakehouse corpora"] = [str(there / "lakehouse"), "corpora"]
        times: dict[str, list[float]] = {name: [] for name in runs}
        for argv in runs.values():
            wall(argv, env)  # warm the page cache and the bytecode of every side
        for _ in range(args.runs):
            for name, argv in runs.items():
                times[name].append(wall(argv, env))
        print(f"{time.strftime('%Y-%m-%d')}, {args.runs} runs each, alternating; "
              f"target <= {TARGET_S} s")
        floor = statistics.median(times["python -c pass (floor)"])
        for name, got in times.items():
            med = statistics.median(got)
            ratio = f"{med / floor:5.1f}x floor"
            mark = ""
            if name.startswith("lakehouse "):
                mark = "  met" if med <= TARGET_S else "  NOT met"
                base = times.get(f"baseline: {name}")
                if base:
                    mark += f"  ({statistics.median(base) / med:.1f}x faster than baseline)"
            print(f"{name:<30} median {med:6.3f} s  max {max(got):6.3f} s  {ratio}{mark}")
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
