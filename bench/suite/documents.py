"""Documents over HTTP against `lakehouse sync` of the same tldr pages, in one run.

The first --pages pages of the tldr wiki's --folders (in path order; by default `pages`,
the English pages, so every side embeds with MiniLM: a baseline from before a corpus's
model followed its languages embeds every language with it; `all`: every folder). Each round
(jobs in alternating order) writes them into a new corpus twice on this checkout's stack:
`documents`, a plain HTTP client sending the pages as documents (id: the page's path, its
title, its text) in requests of --batch, then waiting for the last task; and `sync`,
`lakehouse sync` of a folder holding the same pages. With --baseline, the baseline
checkout's `lakehouse sync` too (it embedded in the CLI, through the gateway, before
documents existed), on its own stack. Every run's pages carry a tag of their own in their
first heading (so in every chunk the model reads), so embedd's cache answers none of
another run's. Pages per second per job (totals over the rounds) and the ratios.

Target: documents over HTTP >= 0.9x `lakehouse sync`: this checkout's (which sends its
pages through the same pipeline) and the baseline's (the sync the target was set against).
The lock is taken for one job at a time (each a few minutes), not for the whole run.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.data import texts
from bench.harness import Run
from bench.harness.http import call, post, session
from bench.harness.stacks import cli
from bench.harness.timing import rotated

OPTIONS = {"pages": 10_000, "rounds": 2, "batch": (500, "documents per request"),
           "folders": ("pages", "the tldr folders taken, comma-separated, or all")}
QUICK = {"pages": 400, "rounds": 1}
_HEADING = re.compile(r"^# (.*)$", re.M)


def tagged(pages: list[tuple[str, str]], folder: Path, tag: str) -> list[dict[str, Any]]:
    """The pages with the run's tag in their first heading, written under folder (for the
    sync), and as documents (for the HTTP client)."""
    docs = []
    for rel, text in pages:
        text = _HEADING.sub(lambda m: f"# {m.group(1)} [{tag}]", text, count=1)
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        title = _HEADING.search(text)
        docs.append({"id": rel, "title": title.group(1) if title else None, "text": text})
    return docs


async def send(http: aiohttp.ClientSession, gateway: str, corpus: str,
               docs: list[dict[str, Any]], batch: int) -> float:
    """Every document sent, then the last task waited for; the wall seconds."""
    t0 = time.perf_counter()
    tasks = [await post(http, f"{gateway}/v1/corpora/{corpus}/documents",
                        {"documents": docs[i:i + batch]}) for i in range(0, len(docs), batch)]
    for task in tasks:  # a corpus's tasks run in order: the last ends last
        while (got := await call(http, "GET", f"{gateway}/v1/tasks/{task['id']}?wait=true")
               )["state"] not in ("succeeded", "failed"):
            pass
        if got["state"] != "succeeded":
            raise SystemExit(f"task {task['id']}: {got['error']} {got['errors'][:3]}")
    return time.perf_counter() - t0


def pages_of(root: Path, n: int, folders: str) -> list[tuple[str, str]]:
    taken = None if folders == "all" else set(folders.split(","))
    files = sorted(p for p in root.rglob("*.md") if (top := p.parts[len(root.parts)])
                   .startswith("pages") and (taken is None or top in taken))
    return [(f.relative_to(root).as_posix(), f.read_text(encoding="utf-8")) for f in files[:n]]


async def main(run: Run) -> None:
    a = run.args
    jobs = ["documents", "sync", *(["baseline sync"] if run.baseline else [])]
    took: dict[str, list[float]] = {j: [] for j in jobs}
    with contextlib.ExitStack() as held:
        with run.between():  # the pages written and the stacks started: others may measure
            root = texts.extract(run.need("corpora", "tldr-pages.tar.gz"), run.folder / "tldr")
            pages = pages_of(root, a.pages, a.folders)
            prepared = {(r, job): tagged(pages, run.folder / f"wiki-{tag(job, r)}", tag(job, r))
                        for r in range(a.rounds) for job in jobs}
            stacks = held.enter_context(run.sides())
        async with session(concurrency=4) as http:
            for r in range(a.rounds):
                for i, job in enumerate(rotated(jobs, r)):
                    if r or i:  # the lock held a job at a time (minutes), not the whole run
                        with run.between():
                            pass
                    docs = prepared[r, job]
                    run.progress(f"round {r}: {job} of {len(docs)} pages")
                    if job == "documents":
                        took[job].append(await send(http, stacks["this"].gateway,
                                                    f"docs_{tag(job, r)}", docs, a.batch))
                    else:
                        side = "baseline" if job.startswith("baseline") else "this"
                        took[job].append(await cli(
                            stacks[side].gateway, "sync", str(run.folder / f"wiki-{tag(job, r)}"),
                            "--corpus", f"sync_{tag(job, r)}", "--quiet", root=stacks[side].root))
    rate = {j: len(pages) * len(t) / sum(t) for j, t in took.items()}
    rows = [(j, rate[j], rate["documents"] / rate[j], "" if j == "documents" else ">= 0.9x")
            for j in jobs]
    run.table(f"{len(pages)} tldr pages ({a.folders}), {a.rounds} round(s), the jobs in turn; pages/s "
              "(totals over the rounds)", ["job", "pages/s:.1f", "documents / job:.2f", "target"],
              rows)
    run.figure(**{f"{j.replace(' ', '_')}_pages_per_s": v for j, v in rate.items()})


def tag(job: str, r: int) -> str:
    """A run's own tag (in its pages' first headings, its corpus and folder names)."""
    return f"{job.replace(' ', '_')}{r}"
