"""A run's results file: JSON under bench/results/<benchmark>/, one file a run.

{"benchmark", "title", "date", "commit", "dirty", "command", "settings", "quick",
 "machine": {"cores", "load": [at the start, at the end]}, "baseline": {"path", "commit"},
 "tables": [{"title", "columns", "rows", "load"}], "lines": [...], "figures": {...},
 "series": {name: [[x, y], ...]}}

The report (bench/reports) reads them back: docs/BENCHMARKS.md and the plots are drawn
from these files alone."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent.parent / "results"


def commit(root: Path) -> tuple[str, bool]:
    """The checkout's short commit and whether its tracked files differ from it."""
    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return out.stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head, bool(git("status", "--porcelain", "--untracked-files=no"))


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def write(record: dict[str, Any], folder: Path = RESULTS) -> Path:
    """The record as bench/results/<benchmark>/<UTC time>-<commit>.json."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = folder / record["benchmark"] / f"{stamp}-{record['commit']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_all(folder: Path = RESULTS) -> dict[str, list[dict[str, Any]]]:
    """Every results file, per benchmark, oldest first (each with its "path")."""
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*/*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        record["path"] = path
        out.setdefault(record["benchmark"], []).append(record)
    return out
