"""Cross-corpus merging: many per-corpus hit lists in, one ranked list out.

What "better" means across corpora, per mode (the reasons are in DECISIONS.md):
- vector:  distance ascending. Every corpus is searched with the same query vector in
  the same embedding space, so distances compare directly.
- hybrid:  vectord's fused score descending. RRF is a sum of 1/(k + rank) over the
  branches with one k for every corpus, so a corpus's fused scores lie on the same
  rank-based scale as any other corpus's; ties go to the nearer vector distance.
- lexical: merge_score = 1/(rrf_k + rank within the corpus). BM25 depends on each
  corpus's own document frequencies and lengths, so raw BM25 never crosses corpora;
  ties (equal rank in two corpora) go to the higher BM25 relative to its corpus's best.
- keyword: as lexical (substring matches carry no score); ties go to the newer item.
Hits are never changed except for added keys: `corpus` (set to the corpus searched),
`corpus_rank` and `merge_score` (null in vector mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from internal.matrixd.boost import Ranking

MODES = ("vector", "lexical", "hybrid", "keyword")


def ranking_of(mode: str) -> Ranking:
    """Whether a mode's merged list is ordered by distance or by merge_score."""
    return "distance" if mode == "vector" else "score"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def merge(results: Sequence[tuple[str, Sequence[dict[str, Any]]]], mode: str,
          rrf_k: int = 60) -> list[dict[str, Any]]:
    """All hits of all corpora (given in request order) in one cross-corpus order."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    rows: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for ci, (corpus, hits) in enumerate(results):
        top_score = max((s for h in hits if (s := _num(h.get("score"))) is not None), default=None)
        for ri, raw in enumerate(hits):
            hit = dict(raw)
            hit["corpus"] = corpus
            rank = ri + 1
            hit["corpus_rank"] = rank
            distance = _num(hit.get("distance"))
            score = _num(hit.get("score"))
            if mode == "vector":
                hit["merge_score"] = None
                key: tuple[Any, ...] = (distance is None, distance or 0.0, ci, rank)
            elif mode == "hybrid":
                merged = score if score is not None else 0.0
                hit["merge_score"] = merged
                key = (-merged, distance is None, distance or 0.0, ci, rank)
            else:
                merged = 1.0 / (rrf_k + rank)
                hit["merge_score"] = merged
                if mode == "lexical":
                    rel = score / top_score if score is not None and top_score else 0.0
                    key = (-merged, -rel, ci, rank)
                else:
                    # ISO-8601 timestamps of one server sort as strings; newest first.
                    updated = str(hit.get("updated_at") or "")
                    key = (-merged, _Desc(updated), ci, rank)
            rows.append((key, hit))
    rows.sort(key=lambda r: r[0])
    return [hit for _, hit in rows]


class _Desc:
    """Wraps a string so that sorting ascending orders it descending."""

    __slots__ = ("v",)

    def __init__(self, v: str) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return self.v > other.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)
