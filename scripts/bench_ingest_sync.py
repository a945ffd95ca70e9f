"""Ingest and sync alone, this checkout against a baseline checkout, side by side.

Starts a stack of each checkout (scripts/bench_gateway.py's start_stack: `lakehouse up`
with its own interpreter, free loopback ports, a temporary data directory), then, for
`--rounds` rounds, the sides alternating which goes first:

- `lakehouse ingest` of Cranfield + CISI (2,858 documents) into a new corpus;
- `lakehouse sync` of tldr-pages' `pages/common` (4,612 pages, extracted from
  ../shared/corpora/tldr-pages.tar.gz to a temporary folder) into a new corpus.

Each side runs its own checkout's CLI against its own stack, one job at a time (the
other stack idle). Every run's texts carry a tag of their own (appended to each document
and page), so embedd's cache answers nothing. Prints documents/s and pages/s per side
(totals over the rounds) and the ratio. Target: >= 1.8x the baseline.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock .venv/bin/python \\
        scripts/bench_ingest_sync.py --baseline /work/base [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import bench_gateway as bg
from bench_load_core import cli, tagged_docs, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
SETS = ("cranfield", "cisi")
FOLDER = "pages/common/"


def extract_common(archive: Path, dest: Path) -> Path:
    """pages/common of the archive under dest; the folder."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(FOLDER)]
        tar.extractall(dest, members=members, filter="data")
    return dest / FOLDER


def tagged_copy(pages: Path, dest: Path, tag: str) -> tuple[Path, int]:
    """The pages with a line naming the run at the end of each; (folder, pages)."""
    n = 0
    for src in sorted(pages.glob("*.md")):
        (dest / src.name).parent.mkdir(parents=True, exist_ok=True)
        (dest / src.name).write_text(src.read_text(encoding="utf-8") + f"\nrun {tag}\n",
                                     encoding="utf-8")
        n += 1
    return dest, n


async def bench(args: argparse.Namespace, roots: dict[str, Path], gateways: dict[str, str],
                tmp: Path) -> None:
    pages = extract_common(args.corpora / "tldr-pages.tar.gz", tmp / "tldr")
    totals: dict[tuple[str, str], list[float]] = {}
    counts: dict[str, int] = {}
    for r in range(args.rounds):
        order = list(roots) if r % 2 == 0 else list(reversed(roots))
        for side in order:
            tag = f"{side}{r}"
            docs = tagged_docs(args.data, SETS, tag)
            counts["ingest"] = len(docs)
            jsonl = write_jsonl(tmp / f"docs-{tag}.jsonl", docs)
            took = await cli(gateways[side], "ingest", str(jsonl), "--corpus",
                             f"ingest_{tag}", "--quiet", root=roots[side])
            totals.setdefault((side, "ingest"), []).append(took)
            print(f"round {r + 1} {side}: ingest {len(docs)} documents in {took:.1f} s",
                  flush=True)
        for side in order:
            tag = f"{side}{r}"
            folder, n = tagged_copy(pages, tmp / f"wiki-{tag}", tag)
            counts["sync"] = n
            took = await cli(gateways[side], "sync", str(folder), "--corpus",
                             f"sync_{tag}", "--quiet", root=roots[side])
            totals.setdefault((side, "sync"), []).append(took)
            print(f"round {r + 1} {side}: sync {n} pages in {took:.1f} s", flush=True)
    base, this = roots
    print()
    print(f"bench_ingest_sync: {args.rounds} round(s), sides alternating; each job alone")
    print()
    print(f"| job | {base} | {this} | {this} / {base} | target |")
    print("|---|---:|---:|---:|---|")
    for job, unit in (("ingest", "documents/s"), ("sync", "pages/s")):
        rate = {side: counts[job] * len(totals[(side, job)]) / sum(totals[(side, job)])
                for side in roots}
        print(f"| {job} ({counts[job]} {unit.split('/')[0]}) | {rate[base]:.1f} {unit} | "
              f"{rate[this]:.1f} {unit} | {rate[this] / rate[base]:.2f}x | >= 1.8x |")
    print(bg.load_line())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="the checkout to compare with")
    ap.add_argument("--rounds", type=int, default=2)
    shared = Path(os.environ.get("LAKEHOUSE_DATA") or ROOT.parent / "shared")
    ap.add_argument("--data", type=Path, default=shared / "data")
    ap.add_argument("--corpora", type=Path, default=shared / "corpora")
    args = ap.parse_args()
    roots = {"before": args.baseline.resolve(), "after": ROOT}
    tmp = Path(tempfile.mkdtemp(prefix="bench-ingest-sync-"))
    try:
        return bg.on_stacks("bench-ingest-sync-stacks-", roots,
                            lambda gateways: bench(args, roots, gateways, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
