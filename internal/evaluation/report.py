"""The evaluation table: one row per mode, as text for people and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from internal.evaluation.ingest import IngestReport
from internal.evaluation.runner import ModeResult

COLUMNS = (("ndcg@10", "nDCG@10"), ("recall@100", "Recall@100"), ("mrr@10", "MRR@10"))


@dataclass(frozen=True)
class Report:
    dataset: str
    split: str
    docs: int
    queries: int
    ingest: IngestReport
    query_embed_seconds: float
    results: list[ModeResult]
    settings: dict[str, Any]

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "docs": self.docs,
            "queries": self.queries,
            "ingest": asdict(self.ingest),
            "query_embed_seconds": round(self.query_embed_seconds, 3),
            "settings": self.settings,
            "modes": [
                {
                    "mode": r.mode,
                    **{key: (round(r.metrics[key], 4) if key in r.metrics else None)
                       for key, _ in COLUMNS},
                    "seconds": round(r.seconds, 3),
                    "ms_per_query": round(r.ms_per_query, 2),
                    "error": r.error,
                }
                for r in self.results
            ],
        }

    def table(self) -> str:
        """A Markdown table (reads as plain text too) with a one-line header."""
        ing = self.ingest
        lines = [
            f"{self.dataset} ({self.split}): {self.docs} docs, {self.queries} judged queries; "
            f"ingest {ing.seconds:.1f} s ({ing.embedded} upserted, {ing.from_cache} of them from the "
            f"vector cache; {ing.reused} reused"
            f"{f', {ing.empty} empty skipped' if ing.empty else ''}); "
            f"query embedding {self.query_embed_seconds:.1f} s",
            "",
            "| mode | " + " | ".join(title for _, title in COLUMNS) + " | seconds | ms/query |",
            "|---|" + "---:|" * (len(COLUMNS) + 2),
        ]
        for r in self.results:
            if r.error is not None:
                lines.append(f"| {r.mode} | failed: {r.error} |")
                continue
            cells = " | ".join(f"{r.metrics[key]:.4f}" for key, _ in COLUMNS)
            lines.append(f"| {r.mode} | {cells} | {r.seconds:.1f} | {r.ms_per_query:.1f} |")
        return "\n".join(lines)


def mean_json(reports: Sequence[Report]) -> dict[str, Any]:
    """Every data set's report and, per mode, the mean of each metric over them."""
    means: list[dict[str, Any]] = []
    for mode in _modes(reports):
        row: dict[str, Any] = {"mode": mode}
        for key, _ in COLUMNS:
            values = _values(reports, mode, key)
            row[key] = None if values is None else round(sum(values) / len(values), 4)
        means.append(row)
    return {"datasets": [r.to_json() for r in reports], "mean": means}


def mean_table(reports: Sequence[Report]) -> str:
    """nDCG@10 of each mode on each data set, and the unweighted mean over the data sets."""
    names = [f"{r.dataset} ({r.split})" for r in reports]
    lines = [
        f"Mean over {len(reports)} data sets (each data set counts once)",
        "",
        "| mode | " + " | ".join(f"{n} nDCG@10" for n in names)
        + " | mean nDCG@10 | mean Recall@100 | mean MRR@10 |",
        "|---|" + "---:|" * (len(names) + 3),
    ]
    for mode in _modes(reports):
        ndcg = _values(reports, mode, "ndcg@10")
        if ndcg is None:
            lines.append(f"| {mode} | failed on some data set |")
            continue
        cells = [f"{v:.4f}" for v in ndcg]
        for key, _ in COLUMNS:
            values = _values(reports, mode, key)
            assert values is not None
            cells.append(f"{sum(values) / len(values):.4f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _modes(reports: Sequence[Report]) -> list[str]:
    seen: dict[str, None] = {}
    for r in reports:
        for m in r.results:
            seen.setdefault(m.mode, None)
    return list(seen)


def _values(reports: Sequence[Report], mode: str, key: str) -> list[float] | None:
    """The metric of one mode on every data set, None when any lacks it (failed)."""
    out: list[float] = []
    for r in reports:
        found = [m for m in r.results if m.mode == mode and m.error is None and key in m.metrics]
        if not found:
            return None
        out.append(found[0].metrics[key])
    return out
