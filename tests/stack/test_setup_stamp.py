"""scripts/setup.sh (run by scripts/run.sh at every start, and by scripts/test.sh) runs pip
only when what it installs from changed: a second start installs nothing.

The script runs for real in a copy of the repository's install files, with a stand-in
interpreter in .venv that writes down what it is asked (pip itself is not the subject).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.helpers import ROOT

STAND_IN = """#!/usr/bin/env bash
here=$(cd "$(dirname "$0")" && pwd)
echo "$*" >> "$here/../asked.log"
if [ "$1" = "-V" ]; then echo "Python 3.11.2"; exit 0; fi
if [ -n "${PIP_FAILS:-}" ] && [ "$3" = "install" ] && [ "$5" = "-e" ]; then exit 1; fi
if [ "$3" = "install" ]; then touch "$here/lakehouse"; chmod +x "$here/lakehouse"; fi
"""


def _project(tmp: Path) -> Path:
    for rel in ("scripts/setup.sh", "pyproject.toml", "clients/python/pyproject.toml"):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp / rel)
    python = tmp / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN)
    python.chmod(0o755)
    return tmp


def _setup(root: Path, *args: str, **env: str) -> tuple[int, str, list[str]]:
    """(exit code, what it printed, the pip installs it ran)."""
    log = root / ".venv" / "asked.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(["bash", "scripts/setup.sh", *args], cwd=root, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})
    asked = log.read_text().splitlines() if log.exists() else []
    return done.returncode, done.stdout, [a for a in asked if a.startswith("-m pip install -q -e")]


def test_a_second_start_installs_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, first, pips = _setup(root)
    assert code == 0 and pips == ["-m pip install -q -e ./clients/python", "-m pip install -q -e ."]
    code, second, pips = _setup(root)
    assert (code, pips) == (0, [])
    assert "into .venv" in first and second.startswith("install: .venv is up to date")


def test_what_counts_as_a_change(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert _setup(root)[2]
    # The test tools are more than the plain install had; the plain one is in them.
    assert _setup(root, "--dev")[2][-1] == "-m pip install -q -e .[dev,bench]"
    assert _setup(root)[2] == []
    assert _setup(root, "--dev")[2] == []
    # A dependency added (either distribution) or a new setup script: install again.
    with (root / "clients" / "python" / "pyproject.toml").open("a") as f:
        f.write("\n# a change\n")
    assert len(_setup(root, "--dev")[2]) == 2
    with (root / "scripts" / "setup.sh").open("a") as f:
        f.write("\n# a change\n")
    assert len(_setup(root, "--dev")[2]) == 2
    # A .venv without the program (half removed by hand): install again.
    (root / ".venv" / "bin" / "lakehouse").unlink()
    assert len(_setup(root, "--dev")[2]) == 2


def test_a_failed_install_is_tried_again(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, _, _ = _setup(root, PIP_FAILS="1")
    assert code != 0
    assert not (root / ".venv" / ".setup-stamp").exists()
    code, _, pips = _setup(root)
    assert code == 0 and len(pips) == 2
