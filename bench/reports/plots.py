"""`python -m bench plots`: the record's pictures, drawn from the results files alone.

- docs/images/bench-recall-qps.png: recall@10 against QPS at each ef_search, Lakehouse,
  Chroma and Qdrant (the newest `peers` results);
- docs/images/bench-ingest-p95.png: the default search's p95 over time during a bulk
  ingest (and the other bulk jobs), against idle (the newest `load` results);
- docs/images/bench-wiki-hit3.png: hit@3 per mode for each wiki question set and
  language (the newest `wiki` results);
- docs/images/bench-feedback-curve.png: nDCG@10 as judged answers are recorded, the boost
  and the learned ranker (the newest `feedback` results).
matplotlib comes with the `bench` extra (`scripts/setup.sh --dev`), never with the server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.harness.results import RESULTS, read_all
from bench.harness.stacks import ROOT

OUT = ROOT / "docs" / "images"


def newest(records: list[dict[str, Any]]) -> dict[str, Any]:
    full = [r for r in records if not r.get("quick")]
    return (full or records)[-1]


def caption(r: dict[str, Any]) -> str:
    return (f"{r['commit']}, {r['date']}, load {r['machine']['load'][0]:.1f}"
            + (", reduced run" if r.get("quick") else ""))


def recall_qps(r: dict[str, Any], ax: Any) -> None:
    for name, points in sorted(r["series"].items()):
        if not name.startswith("recall/QPS "):
            continue
        xs, ys, _ = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label=name.removeprefix("recall/QPS "))
        for x, y, ef in points:
            ax.annotate(f"{int(ef)}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    ax.set(xlabel="recall@10", ylabel="queries a second (concurrency 8)", yscale="log",
           title="Recall against QPS at each ef_search")


def ingest_p95(r: dict[str, Any], ax: Any) -> None:
    for name, points in r["series"].items():
        if name.startswith("p95 during") or name == "p95 idle":
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, linestyle="--" if name == "p95 idle" else "-", label=name)
    ax.set(xlabel="seconds since the bulk job started", ylabel="p95 of the default search, ms",
           title="Searches during bulk work (5 s windows)")


def wiki_hit3(r: dict[str, Any], ax: Any) -> None:
    table = next(t for t in r["tables"] if t["title"].startswith("hit@3"))
    modes = [c.split(":")[0].removesuffix(" hit@3") for c in table["columns"][3:]]
    width = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        ax.bar([i + j * width for i in range(len(table["rows"]))], [row[3 + j] for row in table["rows"]],
               width, label=mode)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(table["rows"]))],
                  [f"{row[0]}\n{row[1]}" for row in table["rows"]], fontsize=7)
    ax.set(ylabel="hit@3", ylim=(0, 1), title="hit@3 per mode, each question set of the tldr wiki")


def feedback_curve(r: dict[str, Any], ax: Any) -> None:
    for name, points in r["series"].items():
        if name.startswith("learning curve"):
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=name.removeprefix("learning curve: "))
    ax.set(xlabel="judged answers recorded", ylabel="nDCG@10, held-out questions", xscale="log",
           title="The learning curve of feedback (SciFact)")


PLOTS: dict[str, tuple[str, Callable[[dict[str, Any], Any], None]]] = {
    "bench-recall-qps.png": ("peers", recall_qps), "bench-ingest-p95.png": ("load", ingest_p95),
    "bench-wiki-hit3.png": ("wiki", wiki_hit3), "bench-feedback-curve.png": ("feedback", feedback_curve)}


def draw(results: Path = RESULTS, out: Path = OUT) -> list[Path]:
    every, made = read_all(results), []
    out.mkdir(parents=True, exist_ok=True)
    for image, (name, fn) in PLOTS.items():
        if not every.get(name):
            print(f"{image}: no results of {name} yet, not drawn")
            continue
        r = newest(every[name])
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
        fn(r, ax)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.text(0.99, 0.01, f"python -m bench {name} at {caption(r)}", ha="right", fontsize=6, alpha=0.7)
        fig.tight_layout()
        fig.savefig(out / image)
        plt.close(fig)
        made.append(out / image)
        print(f"{(out / image).relative_to(ROOT) if (out / image).is_relative_to(ROOT) else out / image}")
    return made


def main(argv: list[str]) -> int:
    draw()
    return 0
