"""The merged list from vectord, made ready for the boost and the filter (no I/O).

vectord's `POST /v1/vectors/search` already ranks the corpora as one corpus holding their
union (internal.vectord.search.union_merge), each mode by its registry entry's merge rule
(lakehouse.wire.modes): by distance (vector; hits carry `merge_distance`), by score
(lexical with the union's BM25 statistics, hybrid fused once over the merged branch
lists; `merge_score`), newest first (keyword), with corpus weights applied. Here each
hit gets `corpus_rank` (its rank among its own corpus's hits) and, in a mode merged
newest first, a rank-based `merge_score` = 1 / (keyword_merge_k + rank) so that the
playbook boost (which divides merge_score) can lift a hit there too.
"""

from __future__ import annotations

from internal.api.responses import RankedHit
from internal.matrixd.boost import Ranking
from lakehouse.wire.modes import ModeSpec


def ranking_of(mode: ModeSpec) -> Ranking:
    """Whether a mode's merged list is ordered by distance or by merge_score."""
    return "distance" if mode.by_distance else "score"


def annotate(hits: list[RankedHit], mode: ModeSpec, keyword_merge_k: int = 60) -> list[RankedHit]:
    """The merged hits in their order, each with corpus_rank and its ranking key, set in
    place (matrixd decodes vectord's answer straight into `RankedHit`s)."""
    seen: dict[str, int] = {}
    for rank, hit in enumerate(hits, 1):
        seen[hit.corpus] = seen.get(hit.corpus, 0) + 1
        hit.corpus_rank = seen[hit.corpus]
        if mode.merge == "distance":
            hit.merge_score = None
            if hit.merge_distance is None:
                hit.merge_distance = hit.distance
        elif mode.merge == "newest":
            hit.merge_score = 1.0 / (keyword_merge_k + rank)
        elif hit.merge_score is None:
            hit.merge_score = hit.score
    return hits
