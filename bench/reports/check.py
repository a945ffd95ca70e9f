"""`python -m bench check [NAME ...]`: every benchmark the record has quoted still runs,
and prints the same figures within noise.

For each quoted benchmark, its script as it was before the harness (at PRE, run from a
worktree of that commit: `--old DIR`) and its module now, each at a reduced scale (the
same options on both sides), one after the other (which goes first alternating), under
the one lock this command holds; then each row both printed, paired by its label, the
old figures beside the new. Figures measured minutes apart on a shared machine differ by
their noise; quality figures (recall, nDCG) should repeat."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import lock
from bench.harness.stacks import ROOT

PRE = "e3c84f1"
B = "{baseline}"
# name -> (the old script, its options, the module's options): the same scale both sides
QUOTED: dict[str, tuple[str, str, str]] = {
    "keys_cpu": ("bench_keys_cpu.py", "--calls 2000", "--calls 2000"),
    "wire_decode": ("bench_wire_decode.py", "--hits 10 100", "--hits 10 --hits 100"),
    "candidate_keys": ("bench_candidate_keys.py", "--repeats 3", "--repeats 3"),
    "forward": ("bench_forward.py", "--lines 50000 --rounds 2", "--lines 50000 --rounds 2"),
    "embed": ("bench_embed.py", "--n 400", "--n 400"),
    "lanes": ("bench_lanes.py", "--texts 500", "--texts 500"),
    "numerics": ("bench_numerics.py", "--rounds 1 --questions 40 --documents 20",
                 "--rounds 1 --questions 40 --documents 20"),
    "mcp": ("bench_mcp.py", "--items 500 --queries 60 --rounds 2", "--items 500 --queries 60 --rounds 2"),
    "gateway": ("bench_gateway.py", "--items 500 --queries 100 --rounds 2", "--items 500 --queries 100 --rounds 2"),
    "keys": ("bench_keys.py", "--items 500 --queries 100 --rounds 1", "--items 500 --queries 100 --rounds 1"),
    "cli_start": ("bench_cli_start.py", "--runs 3", "--runs 3"),
    "vectors": ("bench_vectors.py", "--n 10000 --queries 100", "--n 10000 --queries 100"),
    "matrix": ("bench_matrix.py", "--items 2000 --queries 60", "--items 2000 --queries 60"),
    "binary": ("bench_binary.py", "--n 10000 --queries 100", "--n 10000 --queries 100"),
    "scaling": ("bench_scaling.py", "--sizes 10000 --queries 60", "--sizes 10000 --queries 60"),
    "wal": ("bench_wal.py", "--items 3000", "--items 3000"),
    "upsert_limits": ("bench_upsert_limits.py", "--rounds 1", "--rounds 1"),
    "slow_clients": ("bench_slow_clients.py", "--slow 100 --queries 100 --rounds 1",
                     "--slow 100 --queries 100 --rounds 1"),
    "replicas": ("bench_replicas.py", "--items 10000 --queries 60 --rounds 2 --write-seconds 5",
                 "--items 10000 --queries 60 --rounds 2 --write-seconds 5"),
    "sync": ("bench_sync.py", "--pages 1000", "--pages 1000"),
    "corpora": ("bench_corpora.py", "--queries 40 --rounds 2", "--queries 40 --rounds 2"),
    "shaping": ("bench_shaping.py", "--beir {data}/data --queries 60 --sequential 30 --rounds 1",
                "--queries 60 --sequential 30 --rounds 1"),
    "cpu": ("bench_cpu_per_search.py", f"--baseline {B} --beir {{data}}/data --queries 100 --rounds 2",
            f"--baseline {B} --queries 100 --rounds 2"),
    "load": ("bench_load.py", "--rounds 1 --idle-seconds 5 --fair-seconds 5 --limit 200",
             "--rounds 1 --idle-seconds 5 --fair-seconds 5 --limit 200"),
    "newcomer": ("bench_newcomer.py", "--rounds 1", "--rounds 1"),
    "lexical": ("bench_lexical.py", "--docs 20000 --queries 60", "--docs 20000 --queries 60"),
    "federation": ("bench_federation.py", "--max-queries 40", "--max-queries 40"),
    "smart": ("bench_smart.py", "--limit 10", "--limit 10"),
    "ranker": ("bench_ranker.py", "--rounds 1", "--rounds 1"),
    "wiki": ("bench_wiki.py", "--folders common,zh", "--folders common,zh"),
    "soak": ("bench_soak.py", "--minutes 3 --kill-embedd-at 1 --kill-vectord-at 2 --docs 200 --peak-seconds 5",
             "--minutes 3 --kill-embedd-at 1 --kill-vectord-at 2 --docs 200 --peak-seconds 5"),
    "chroma": ("bench_chroma.py", "--n 20000 --queries 200 --rounds 1 --lakehouse default",
               "--n 20000 --queries 200 --rounds 1 --lakehouse default"),
    "million_pg": ("bench_million.py", "--dir {tmp}/old-million --n 20000 data load-float32 load-float16 "
                "index-float32 index-float16 recall measure report",
                "--dir {tmp}/new-million --n 20000"),
    "ingest_sync": ("bench_ingest_sync.py", f"--baseline {B} --rounds 1", f"--baseline {B} --rounds 1"),
    "failover": ("bench_failover.py", "--items 2000 --rounds 1", "--items 2000 --rounds 1"),
    "halfvec_quality": ("bench_halfvec_quality.py", "--data {data}/data", ""),
    "client_install": ("bench_client_install.py", "", ""),
    "run_start": ("bench_run_start.py", "--rounds 1", "--rounds 1"),
}
NUM = re.compile(r"(?<![\w.])[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?")


UNITS = {"ms", "mb", "mib", "gb", "kb", "s", "x", "µs", "us"}


def label(text: str) -> str:
    """A row's label: its words, figures, units and parentheses left out."""
    text = NUM.sub(" ", re.sub(r"\([^)]*\)", " ", text.lower()))
    return " ".join(w for w in re.findall(r"[a-z][a-z_/@]+", text) if w not in UNITS)


def is_figure(cell: str) -> bool:
    return bool(NUM.fullmatch(cell.replace(" ", "").rstrip("x%") or "-"))


def rows(text: str) -> dict[str, list[str]]:
    """Each printed line holding figures, by its label: markdown rows cell by cell, other
    lines as text; a label seen again gets a count."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or set(s) <= set("|-: ") or s.startswith(("results:", "machine load")):
            continue
        if s.startswith("|"):
            cells = [c.strip() for c in s.strip("|").split("|")]
            figures = [NUM.findall(c)[0] for c in cells if c and is_figure(c)]
            name = label(" ".join(c for c in cells if not is_figure(c)))
            if not name and figures:  # a row of figures alone: its first cell names it
                name, figures = f"#{cells[0]}", figures[1:]
        else:
            figures, name = NUM.findall(s), label(s)
        if not figures or not name or name == "#":
            continue
        key, n = name, 1
        while key in out:
            n += 1
            key = f"{name} ({n})"
        out[key] = figures
    return out


def side_by_side(name: str, old: str, new: str) -> str:
    a, b = rows(old), rows(new)
    pairs = [(k, k) for k in a if k in b]
    for k in a:  # a text line's label holds words a table row's does not: words within pair
        if k not in b and (m := next((j for j in b if len(j) > 5 and j not in dict(pairs).values()
                                      and (set(j.split()) <= set(k.split())
                                           or set(k.split()) <= set(j.split()))), None)):
            pairs.append((k, m))
    lines = [f"### {name}", "", "| row | old script | new module |", "|---|---|---|"]
    lines += [f"| {m} | {' · '.join(a[k])} | {' · '.join(b[m])} |" for k, m in pairs]
    lines += ["", f"{len(pairs)} rows paired; {len(a) - len(pairs)} old and {len(b) - len(pairs)} new unpaired", ""]
    return "\n".join(lines)


def run_one(argv: list[str], cwd: Path, log: Path) -> tuple[str, float, int]:
    env = {**os.environ, lock.ENV: lock.HELD, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    log.write_text(done.stdout + "\n--- stderr\n" + done.stderr)
    return done.stdout, time.perf_counter() - t0, done.returncode


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench check", description=__doc__)
    ap.add_argument("names", nargs="*", help=f"of {', '.join(QUOTED)} (default: all)")
    ap.add_argument("--old", type=Path, required=True, help=f"a worktree of {PRE} (the scripts before)")
    ap.add_argument("--baseline", type=Path, help="the baseline the comparing benchmarks run against")
    ap.add_argument("--out", type=Path, default=ROOT / "var" / "check", help="logs and the tables")
    ap.add_argument("--tables", action="store_true", help="run nothing: the tables of the logs in --out")
    a = ap.parse_args(argv)
    if a.tables:
        for name in a.names or list(QUOTED):
            logs = [a.out / f"{name}.{side}.log" for side in ("old", "new")]
            if all(p.is_file() for p in logs):
                old, new = (p.read_text().split("\n--- stderr\n")[0] for p in logs)
                print(side_by_side(name, old, new))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    data = os.environ.get("LAKEHOUSE_DATA", str(ROOT.parent / "shared"))
    fill = {"data": data, "tmp": str(a.out), "baseline": str((a.baseline or a.old).resolve())}
    report = a.out / "check.md"
    held = lock.Lock()
    for i, name in enumerate(a.names or list(QUOTED)):
        script, old_args, new_args = QUOTED[name]
        old = [sys.executable, str(a.old / "scripts" / script), *old_args.format(**fill).split()]
        new = [sys.executable, "-m", "bench", name, *new_args.format(**fill).split(), "--quick"]
        with lock.held(held):
            got: dict[str, tuple[str, float, int]] = {}
            for side in (("old", "new") if i % 2 == 0 else ("new", "old")):
                got[side] = run_one(old if side == "old" else new, a.old if side == "old" else ROOT,
                                    a.out / f"{name}.{side}.log")
        text = side_by_side(name, got["old"][0], got["new"][0])
        status = ", ".join(f"{s} {got[s][1]:.0f} s (exit {got[s][2]})" for s in ("old", "new"))
        with report.open("a") as f:
            f.write(f"{text}\n{status}; load {os.getloadavg()[0]:.1f}\n\n")
        print(f"{text}\n{status}\n", flush=True)
    print(f"tables: {report}")
    return 0
