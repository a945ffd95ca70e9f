"""The evaluation table: one row per mode, as text for people and as JSON."""

from __future__ import annotations

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
