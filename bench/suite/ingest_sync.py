"""Ingest and sync alone, this checkout against a baseline checkout, side by side.

A stack of each checkout; for --rounds rounds, the sides alternating which goes first:
`lakehouse ingest` of Cranfield + CISI (2,858 documents) into a new corpus, and `lakehouse
sync` of tldr-pages' `pages/common` (4,612 pages) into a new corpus. Each side runs its own
checkout's CLI against its own stack, one job at a time; every run's texts carry a tag of
their own, so embedd's cache answers nothing. Documents/s and pages/s per side (totals
over the rounds) and the ratio.

Target: >= 1.8x the baseline.
"""

from __future__ import annotations

from pathlib import Path

from bench.data import texts
from bench.harness import Run
from bench.harness.stacks import cli
from bench.harness.timing import alternated

OPTIONS = {"rounds": 2, "limit": (0, "at most this many documents and pages (0: all)")}
QUICK = {"rounds": 1, "limit": 300}


def tagged_copy(pages: Path, dest: Path, tag: str, limit: int) -> int:
    """The pages with a line naming the run at the end of each; how many."""
    files = sorted(pages.glob("*.md"))[:limit or None]
    dest.mkdir(parents=True)
    for src in files:
        (dest / src.name).write_text(src.read_text(encoding="utf-8") + f"\nrun {tag}\n",
                                     encoding="utf-8")
    return len(files)


async def main(run: Run) -> None:
    if run.baseline is None:
        raise SystemExit("ingest_sync compares two checkouts: give --baseline DIR")
    a = run.args
    pages = texts.extract(run.need("corpora", "tldr-pages.tar.gz"), run.folder / "tldr",
                          "pages/common/")
    took: dict[tuple[str, str], list[float]] = {}
    counts: dict[str, int] = {}
    with run.sides() as stacks:
        for r in range(a.rounds):
            order = alternated(["baseline", "this"], r)
            for side in order:
                tag = f"{side}{r}"
                docs = texts.tagged_docs(run.data, ("cranfield", "cisi"), tag)[:a.limit or None]
                counts["ingest"] = len(docs)
                jsonl = texts.write_jsonl(run.folder / f"docs-{tag}.jsonl", docs)
                took.setdefault((side, "ingest"), []).append(await cli(
                    stacks[side].gateway, "ingest", str(jsonl), "--corpus", f"ingest_{tag}",
                    "--quiet", root=stacks[side].root))
            for side in order:
                tag = f"{side}{r}"
                counts["sync"] = tagged_copy(pages, run.folder / f"wiki-{tag}", tag, a.limit)
                took.setdefault((side, "sync"), []).append(await cli(
                    stacks[side].gateway, "sync", str(run.folder / f"wiki-{tag}"), "--corpus",
                    f"sync_{tag}", "--quiet", root=stacks[side].root))
    rows = []
    for job, unit in (("ingest", "documents/s"), ("sync", "pages/s")):
        rate = {s: counts[job] * len(took[(s, job)]) / sum(took[(s, job)]) for s in ("baseline", "this")}
        rows.append((f"{job} ({counts[job]} {unit.split('/')[0]})", rate["baseline"], rate["this"],
                     rate["this"] / rate["baseline"], unit, ">= 1.8x"))
    run.table(f"{a.rounds} round(s), sides alternating; each job alone",
              ["job", "baseline:.1f", "this:.1f", "this / baseline:.2f", "unit", "target"], rows)
