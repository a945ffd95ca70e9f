"""The workshop stays drawn right: bench/ is rooms by concern (harness, data, peers,
reports, the suite of benchmarks), imports run one way, no module passes 500 lines, the
harness is imported and never copied; a benchmark runs over it and leaves a results file
the report and the plots draw from."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

BENCH = ROOT / "bench"
# A room may import the rooms below it, never one beside or above it.
FLOOR = {"harness": 0, "data": 1, "peers": 1, "suite": 2, "reports": 2, "cli": 3, "__main__": 4}


def modules() -> list[Path]:
    return sorted(BENCH.rglob("*.py"))


def room(path: Path) -> str:
    rel = path.relative_to(BENCH).parts
    return rel[0] if len(rel) > 1 else path.stem


def bench_imports(path: Path) -> set[str]:
    """The rooms of bench/ this module imports (anywhere in it: in functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            parts = name.split(".")
            if parts[0] == "bench" and len(parts) > 1:
                out.add(parts[1])
    return out


def test_no_workshop_module_passes_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert modules() and long == {}


def test_imports_run_one_way() -> None:
    wrong = []
    for path in modules():
        mine = room(path)
        for other in bench_imports(path) - {mine, "harness" if mine == "harness" else ""}:
            if FLOOR.get(other, 9) >= FLOOR.get(mine, 9):
                wrong.append(f"{path.relative_to(ROOT)} imports bench.{other}")
        if mine == "suite" and "suite" in bench_imports(path):
            wrong.append(f"{path.relative_to(ROOT)} imports another benchmark")
    assert wrong == []


def test_the_harness_is_imported_never_copied() -> None:
    harness = {n.name for p in (BENCH / "harness").glob("*.py")
               for n in ast.parse(p.read_text(encoding="utf-8")).body
               if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
               and not n.name.startswith("_")}
    copied, started = [], []
    for path in modules():
        text = path.read_text(encoding="utf-8")
        if room(path) != "harness":
            copied += [f"{path.relative_to(ROOT)}:{n.name}" for n in ast.parse(text).body
                       if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                       and n.name in harness]
            # a stack, the lock and free ports are the harness's alone
            started += [f"{path.relative_to(ROOT)}: {s}" for s in
                        ('"internal.cli.main", "up"', "fcntl", "s.bind((") if s in text]
    assert {"Stack", "pct", "closed_loop", "free_port"} <= harness
    assert copied == [] and started == []


def test_every_benchmark_declares_itself() -> None:
    from bench.harness.registry import benchmark, names, title
    from bench.harness.run import parser

    got = names()
    assert len(got) >= 40 and "gateway" in got
    for name in got:
        module = benchmark(name)
        assert callable(module.main) and len(title(module)) > 20, name
        quick = getattr(module, "QUICK", {})
        assert set(quick) <= set(getattr(module, "OPTIONS", {})), name
        assert parser(name, module).parse_args([]).results, name


def test_a_run_leaves_results_the_report_and_the_plots_draw(tmp_path: Path) -> None:
    env = {**os.environ, "LAKEHOUSE_BENCH_LOCK": "held"}  # the test measures nothing
    done = subprocess.run([sys.executable, "-m", "bench", "wire_decode", "--hits", "10",
                           "--results", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "| hits | answer bytes |" in done.stdout and "machine load average" in done.stdout
    (path,) = tmp_path.glob("wire_decode/*.json")
    record = json.loads(path.read_text())
    assert record["tables"][0]["rows"][0][0] == 10 and record["commit"]
    assert record["settings"]["hits"] == ["10"] and record["machine"]["cores"]
    from bench.harness.registry import benchmark
    from bench.reports import plots, report

    for name, series in (("peers", {"recall/QPS lakehouse": [[0.9, 900.0, 40], [0.99, 500.0, 100]]}),
                         ("load", {"p95 during ingest": [[2.5, 30.0], [7.5, 41.0]],
                                   "p95 idle": [[0.0, 20.0], [10.0, 20.0]]}),
                         ("feedback", {"learning curve: boost alone": [[10, 0.70], [200, 0.74]]})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.json").write_text(json.dumps({**record, "benchmark": name, "series": series}))
    drawn = plots.draw(tmp_path, tmp_path / "images")
    assert len(drawn) == 3 and all(p.stat().st_size > 5000 for p in drawn)
    assert benchmark("wire_decode")
    text = report.render(tmp_path)
    assert "## wire_decode" in text and "| hits | answer bytes |" in text
    assert text.count("\n") <= 600


def test_the_check_pairs_an_old_scripts_rows_with_the_modules() -> None:
    from bench.reports.check import side_by_side

    old = ("searches      n   p50 ms   p95 ms  p95/idle\n"
           "idle        120     12.3     20.1     1.00x\n"
           "MCP / HTTP p50: 1.86x (+7.19 ms a call)\n"
           "| POST /v1/matrix/search (baseline)     |   8.41 |  14.60 |")
    new = ("| searches | n | p50 ms | p95 ms | p95 / idle | not 200 |\n|---|---:|---:|---:|---:|---|\n"
           "| idle | 118 | 12.9 | 21.0 | 1.00 |  |\n"
           "MCP / HTTP p50: 1.90x (+7.50 ms a call)\n"
           "| POST /v1/matrix/search | 8.50 | 14.20 |")
    table = side_by_side("x", old, new)
    assert "| idle | 120 · 12.3 · 20.1 · 1.00 | 118 · 12.9 · 21.0 · 1.00 |" in table
    assert "| post matrix/search | 8.41 · 14.60 | 8.50 · 14.20 |" in table
    assert "| mcp http | 1.86 · +7.19 | 1.90 · +7.50 |" in table
    assert "3 rows paired; 0 old and 0 new unpaired" in table
