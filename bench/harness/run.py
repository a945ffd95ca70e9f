"""One run of one benchmark: its options, its stacks, what it prints, its results file.

A benchmark is a module of bench/suite with a docstring (its first line the title),
an optional OPTIONS ({"queries": 200, "upsert": (0, "help")}: each a --flag whose type is
its default's; a bool is a switch), an optional QUICK (the options of a reduced run:
`--quick`, the check and the harness's tests use it) and `main(run)` (sync or async).
The harness adds --baseline DIR, --url URL, --data DIR, --quick, --results DIR, --no-results,
takes the lock, prints the load under every table, and writes the results file."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import inspect
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.harness import lock, results, stacks
from bench.harness.registry import title
from bench.harness.table import markdown, plain


def data_dir() -> Path:
    """The shared data sets: $LAKEHOUSE_DATA, else ../shared beside the checkout."""
    return Path(os.environ.get("LAKEHOUSE_DATA") or stacks.ROOT.parent / "shared")


class Run:
    """What a benchmark's main(run) is handed."""

    def __init__(self, name: str, module: ModuleType, args: argparse.Namespace) -> None:
        self.name, self.args = name, args
        self.title = title(module)
        self.root = stacks.ROOT
        self.baseline: Path | None = args.baseline.resolve() if args.baseline else None
        self.data: Path = args.data
        self.folder = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-{name}-"))
        self.lock = lock.Lock()
        head, dirty = results.commit(self.root)
        self.record: dict[str, Any] = {
            "benchmark": name, "title": self.title,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": head, "dirty": dirty, "command": "python -m bench " + " ".join(sys.argv[1:]),
            "settings": {k: plain(v) for k, v in vars(args).items()}, "quick": args.quick,
            "unlocked": args.unlocked,
            "machine": {"cores": os.cpu_count(), "load": [results.load_average()]},
            "baseline": None, "tables": [], "lines": [], "figures": {}, "series": {}}
        if self.baseline:
            self.record["baseline"] = {"path": str(self.baseline),
                                       "commit": results.commit(self.baseline)[0]}

    # --- what the benchmark prints and keeps ---------------------------------------
    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Prints the table (its title, the markdown, the machine's load) and keeps it."""
        load = results.load_average()
        print(f"\n{title}\n\n{markdown(columns, rows)}\n"
              f"machine load average while measuring: {load:.1f} on {os.cpu_count()} cores",
              flush=True)
        self.record["tables"].append({"title": title, "columns": list(columns), "load": load,
                                      "rows": [[plain(v) for v in row] for row in rows]})

    def say(self, text: str, **figures: Any) -> None:
        """Prints a line and keeps it, with the figures it states by name."""
        print(text, flush=True)
        self.record["lines"].append(text)
        self.figure(**figures)

    def figure(self, **figures: Any) -> None:
        self.record["figures"].update({k: plain(v) for k, v in figures.items()})

    def series(self, name: str, points: Sequence[Sequence[float]]) -> None:
        """A curve the plots draw (p95 over time, a learning curve): [[x, y], ...]."""
        self.record["series"][name] = [[plain(v) for v in p] for p in points]

    def progress(self, text: str) -> None:
        """A line on stderr: where a long run is, kept out of the results."""
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    # --- what the benchmark runs on --------------------------------------------------
    def roots(self) -> dict[str, Path]:
        """The checkouts measured: "this", and "baseline" with --baseline."""
        out = {"this": self.root}
        if self.baseline:
            out["baseline"] = self.baseline
        return out

    @contextlib.contextmanager
    def sides(self, env: Mapping[str, str] | None = None, args: Sequence[str] = (),
              baseline: bool = True) -> Iterator[dict[str, stacks.Stack]]:
        """A stack of each checkout ("this": --url's when given), stopped afterwards."""
        with contextlib.ExitStack() as held:
            out: dict[str, stacks.Stack] = {}
            for side, root in self.roots().items():
                if side == "baseline" and not baseline:
                    continue
                if side == "this" and self.args.url:
                    out[side] = stacks.Stack(root, self.folder / side, self.args.url)
                    continue
                self.progress(f"starting the stack of {side} ({root})")
                out[side] = held.enter_context(
                    stacks.running(root, self.folder / side, env, args))
            yield out

    @contextlib.contextmanager
    def stack(self, env: Mapping[str, str] | None = None, args: Sequence[str] = (),
              tag: str = "this") -> Iterator[stacks.Stack]:
        """One stack of this checkout (--url's when given), with env over the defaults."""
        if self.args.url and not env and not args:
            yield stacks.Stack(self.root, self.folder / tag, self.args.url)
            return
        with stacks.running(self.root, self.folder / tag, env, args) as s:
            yield s

    @contextlib.contextmanager
    def between(self) -> Iterator[None]:
        """The lock let go for the block (a long preparation done, before measuring: others
        may measure in between), taken again after it."""
        self.lock.release()
        try:
            yield
        finally:
            self.lock.take()

    def need(self, *parts: str) -> Path:
        """A path under the shared data; absent, the run stops saying so."""
        path = self.data.joinpath(*parts)
        if not path.exists():
            raise SystemExit(f"not run: data absent ({path}; set LAKEHOUSE_DATA or --data)")
        return path


def parser(name: str, module: ModuleType) -> argparse.ArgumentParser:
    doc = (module.__doc__ or name).strip()
    ap = argparse.ArgumentParser(prog=f"python -m bench {name}", description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for key, spec in getattr(module, "OPTIONS", {}).items():
        default, text = spec if isinstance(spec, tuple) else (spec, None)
        flag = "--" + key.replace("_", "-")
        if isinstance(default, bool):
            ap.add_argument(flag, action="store_true", help=text)
        elif isinstance(default, list):
            ap.add_argument(flag, action="append", default=[], help=text)
        else:
            ap.add_argument(flag, type=type(default), default=default, help=text)
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="a checkout of an earlier main (its own .venv), measured in the "
                         "same run, alternating with this one")
    ap.add_argument("--url", help="a running stack's gateway to measure instead of starting one")
    ap.add_argument("--data", type=Path, default=data_dir(),
                    help="the shared data sets (default: $LAKEHOUSE_DATA or ../shared)")
    ap.add_argument("--quick", action="store_true",
                    help="a reduced run (the module's QUICK options): a check, not a figure")
    ap.add_argument("--results", type=Path, default=results.RESULTS,
                    help="where the results file goes (default: bench/results)")
    ap.add_argument("--no-results", action="store_true", help="write no results file")
    ap.add_argument("--unlocked", action="store_true",
                    help="quality figures only (hit@3, nDCG, recall): run outside the lock at nice 19; "
                         "its timings are not figures")
    return ap


def execute(name: str, module: ModuleType, argv: Sequence[str]) -> int:
    """Parse, take the lock, run, print and keep the results."""
    ap = parser(name, module)
    args = ap.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
        for key, value in getattr(module, "QUICK", {}).items():
            if key not in given:
                setattr(args, key, value)
    run = Run(name, module, args)
    print(f"# {name}: {run.title}\n# {run.record['date']}, {run.record['commit']}"
          f"{' (uncommitted changes)' if run.record['dirty'] else ''}, {os.cpu_count()} cores, "
          f"load {run.record['machine']['load'][0]:.1f}", flush=True)
    if args.unlocked:  # the lock is for timings; a quality run yields the CPU to them
        os.nice(19)
        run.lock.inherited = True
    try:
        with lock.held(run.lock):
            out = module.main(run)
            if inspect.iscoroutine(out):
                out = asyncio.run(out)
    finally:
        shutil.rmtree(run.folder, ignore_errors=True)
    run.record["machine"]["load"].append(results.load_average())
    if not args.no_results:
        path = results.write(run.record, args.results)
        print(f"\nresults: {path.relative_to(stacks.ROOT) if path.is_relative_to(stacks.ROOT) else path}")
    return int(out or 0)
