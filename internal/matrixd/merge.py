"""The merged list from vectord, made ready for the boost and the filter (no I/O).

vectord's `POST /v1/vectors/search` already ranks the corpora as one corpus holding their
union (internal.vectord.search.union_merge: vector by distance; lexical by BM25 computed with the
union's statistics; hybrid fused once over the merged branch lists; keyword newest
first), with corpus weights applied: score-ranked hits carry `merge_score`, vector hits
`merge_distance`. Here each hit gets `corpus_rank` (its rank among its own corpus's hits)
and, in keyword mode, a rank-based `merge_score` = 1 / (rrf_k + rank) so that the
playbook boost (which divides merge_score) can lift a hit there too.
"""

from __future__ import annotations

from internal.api.responses import RankedHit
from internal.api.vectord import MODES
from internal.matrixd.boost import Ranking


def ranking_of(mode: str) -> Ranking:
    """Whether a mode's merged list is ordered by distance or by merge_score."""
    return "distance" if mode == "vector" else "score"


def annotate(hits: list[RankedHit], mode: str, rrf_k: int = 60) -> list[RankedHit]:
    """The merged hits in their order, each with corpus_rank and its ranking key, set in
    place (matrixd decodes vectord's answer straight into `RankedHit`s)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    seen: dict[str, int] = {}
    for rank, hit in enumerate(hits, 1):
        seen[hit.corpus] = seen.get(hit.corpus, 0) + 1
        hit.corpus_rank = seen[hit.corpus]
        if mode == "vector":
            hit.merge_score = None
            if hit.merge_distance is None:
                hit.merge_distance = hit.distance
        elif mode == "keyword":
            hit.merge_score = 1.0 / (rrf_k + rank)
        elif hit.merge_score is None:
            hit.merge_score = hit.score
    return hits
