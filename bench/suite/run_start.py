"""How long `scripts/run.sh` takes to "Lakehouse is up", and what it prints on the way.

For this checkout and, with --baseline, another one (a copy with its own .venv: never a
checkout others run from, since its run.sh may reinstall into its .venv), each on free
ports with its own data directory and the README's wiki: a first start (a new data
directory, and the install stamp removed, so its setup runs pip as after a change to
pyproject.toml), then second starts with nothing changed, --rounds times, the checkouts
alternating which goes first. Per start: the seconds from launching run.sh to the
"Lakehouse is up" line, the lines shown until then, how many were setuptools' or
platformdirs' warnings.

Target: a second start <= 5 s.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

from bench.harness import Run
from bench.harness.stacks import SECTIONS, free_port
from bench.harness.timing import rotated

OPTIONS = {"rounds": 3, "show": (False, "print what each first start showed")}
QUICK = {"rounds": 1}
TARGET_S = 5.0
NOISE = ("Editable installation", "BuildBackendWarning", "XDG_RUNTIME_DIR")


def run_sh(root: Path, data: Path) -> tuple[float, list[str]]:
    """run.sh of root until "Lakehouse is up", then Ctrl-C and wait for it to stop."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update({f"LAKEHOUSE_{s}_PORT": str(free_port()) for s in SECTIONS})
    env.update(LAKEHOUSE_VECTORD_DATA_DIR=str(data / "pg"),
               LAKEHOUSE_SYNC_WIKI_DIR=str(root / "docs" / "examples" / "wiki"))
    began = time.perf_counter()
    proc = subprocess.Popen(["bash", str(root / "scripts" / "run.sh"), "--log-dir", str(data / "logs")],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    lines, took = [], 0.0
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("Lakehouse is up: "):
            took = time.perf_counter() - began
            break
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    if not took:
        raise SystemExit(f"{root}: run.sh never got up:\n" + "\n".join(lines[-30:]))
    return took, lines


def main(run: Run) -> None:
    systems = run.roots()
    rows, second = [], {name: [] for name in systems}  # type: ignore[var-annotated]

    def once(name: str, which: str) -> None:
        took, lines = run_sh(systems[name], run.folder / name)
        rows.append((name, which, took, len(lines), sum(any(n in x for n in NOISE) for x in lines)))
        if which == "second":
            second[name].append(took)
        if run.args.show and which == "first":
            print("\n".join(f"    | {line}" for line in lines))

    for name, root in systems.items():
        (root / ".venv" / ".setup-stamp").unlink(missing_ok=True)
        once(name, "first")
    for r in range(run.args.rounds):
        for name in rotated(list(systems), r):
            once(name, "second")
    run.table(f"second starts: {run.args.rounds} each, alternating", ["checkout", "start",
              "seconds:.2f", "lines:d", "setuptools/XDG warning lines:d"], rows)
    for name, times in second.items():
        run.say(f"{name}: second start median {statistics.median(times):.2f} s (target <= {TARGET_S:g} s)")
    if "baseline" in second:
        ratio = statistics.median(second["this"]) / statistics.median(second["baseline"])
        run.say(f"second start, this / baseline: {ratio:.2f}x")
