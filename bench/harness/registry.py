"""The benchmarks: the modules of bench/suite, found by name (the harness and the reports
read them without importing the suite as a whole)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

SUITE = Path(__file__).resolve().parent.parent / "suite"


def names() -> list[str]:
    """Every benchmark: the modules of bench/suite."""
    return sorted(m.name for m in pkgutil.iter_modules([str(SUITE)]) if not m.name.startswith("_"))


def benchmark(name: str) -> ModuleType:
    if name not in names():
        raise SystemExit(f"no benchmark {name!r}; `python -m bench list` names them")
    return importlib.import_module(f"bench.suite.{name}")


def title(module: ModuleType) -> str:
    """A benchmark's title: its docstring's first paragraph, on one line."""
    return " ".join((module.__doc__ or module.__name__).strip().split("\n\n")[0].split())
