"""How long `scripts/run.sh` takes to "Lakehouse is up", and what it prints on the way.

For this checkout and, with --baseline DIR, another one (e.g. the previous main, a copy
with its own .venv: never a checkout others run from, since its run.sh may reinstall
into its .venv), each on free ports with its own data directory and the README's wiki
(`LAKEHOUSE_SYNC_WIKI_DIR=docs/examples/wiki`):

- first start: a new data directory (initdb), and this checkout's install stamp removed,
  so its setup runs pip as after a change to pyproject.toml;
- second start: the same again with nothing changed, `--rounds` times, the two checkouts
  alternating which goes first.

Prints per start the seconds from launching run.sh to the "Lakehouse is up" line, the
lines the terminal showed until then, and how many were setuptools' or platformdirs'
warnings. Target: a second start <= 5 s.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_run_start.py [--rounds 3] [--baseline /tmp/main-copy]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 5.0
NOISE = ("Editable installation", "BuildBackendWarning", "XDG_RUNTIME_DIR")
SECTIONS = ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC", "MCPD")


@dataclass
class Start:
    seconds: float
    lines: list[str]

    @property
    def noise(self) -> int:
        return sum(any(n in line for n in NOISE) for line in self.lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(root: Path, data: Path) -> Start:
    """run.sh of root until "Lakehouse is up", then Ctrl-C and wait for it to stop."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update({f"LAKEHOUSE_{s}_PORT": str(free_port()) for s in SECTIONS})
    env.update(LAKEHOUSE_VECTORD_DATA_DIR=str(data / "pg"),
               LAKEHOUSE_SYNC_WIKI_DIR=str(root / "docs" / "examples" / "wiki"))
    began = time.perf_counter()
    proc = subprocess.Popen(["bash", str(root / "scripts" / "run.sh"), "--log-dir",
                             str(data / "logs")], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert proc.stdout is not None
    lines: list[str] = []
    took = 0.0
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("Lakehouse is up: "):
            took = time.perf_counter() - began
            break
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    if not took:
        raise SystemExit(f"{root}: run.sh never got up:\n" + "\n".join(lines[-30:]))
    return Start(took, lines)


def show(name: str, which: str, s: Start) -> None:
    print(f"{name:<10} {which:<7} {s.seconds:6.2f} s  {len(s.lines):3d} lines  "
          f"{s.noise:3d} setuptools/XDG warning lines")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another checkout with its own .venv")
    ap.add_argument("--show", action="store_true", help="print what each first start showed")
    args = ap.parse_args()
    systems = {"this": ROOT}
    if args.baseline:
        systems["baseline"] = args.baseline.resolve()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at {head}, load "
          f"{os.getloadavg()[0]:.1f}; second starts: {args.rounds} each, alternating")
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-run-start-"))
    second: dict[str, list[float]] = {name: [] for name in systems}
    try:
        for name, root in systems.items():
            (root / ".venv" / ".setup-stamp").unlink(missing_ok=True)
            first = start(root, folder / name)
            show(name, "first", first)
            if args.show:
                print("\n".join(f"    | {line}" for line in first.lines))
        for r in range(args.rounds):
            names = list(systems)[r % len(systems):] + list(systems)[:r % len(systems)]
            for name in names:
                s = start(systems[name], folder / name)
                second[name].append(s.seconds)
                show(name, "second", s)
                if args.show and r == 0:
                    print("\n".join(f"    | {line}" for line in s.lines))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for name, times in second.items():
        print(f"{name}: second start median {statistics.median(times):.2f} s "
              f"(target <= {TARGET_S:g} s)")
    if "baseline" in second:
        ratio = statistics.median(second["this"]) / statistics.median(second["baseline"])
        print(f"second start, this / baseline: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
