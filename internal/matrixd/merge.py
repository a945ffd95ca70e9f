"""The merged list from vectord, made ready for the boost and the filter (no I/O).

vectord's `POST /v1/vectors/search` already ranks the corpora as one corpus holding their
union (internal.vectord.merge: vector by distance; lexical by BM25 computed with the
union's statistics; hybrid fused once over the merged branch lists; keyword newest
first), with corpus weights applied: score-ranked hits carry `merge_score`, vector hits
`merge_distance`. Here each hit gets `corpus_rank` (its rank among its own corpus's hits)
and, in keyword mode, a rank-based `merge_score` = 1 / (rrf_k + rank) so that the
playbook boost (which divides merge_score) can lift a hit there too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from internal.api.vectord import MODES, Hit
from internal.matrixd.boost import Ranking


def ranking_of(mode: str) -> Ranking:
    """Whether a mode's merged list is ordered by distance or by merge_score."""
    return "distance" if mode == "vector" else "score"


def annotate(hits: Sequence[Hit], mode: str, rrf_k: int = 60) -> list[dict[str, Any]]:
    """The merged hits in their order, each with corpus_rank and its ranking key.

    vectord's `Hit` structs become matrixd's hits here, once: JSON objects holding what
    vectord sent, in its order (a field it left out stays out), which the boost, the
    gates and the answer then extend.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    seen: dict[str, int] = {}
    out: list[dict[str, Any]] = msgspec.to_builtins(hits)
    for rank, hit in enumerate(out, 1):
        corpus = str(hit.get("corpus"))
        seen[corpus] = seen.get(corpus, 0) + 1
        hit["corpus_rank"] = seen[corpus]
        if mode == "vector":
            hit["merge_score"] = None
            if hit.get("merge_distance") is None:
                hit["merge_distance"] = hit.get("distance")
        elif mode == "keyword":
            hit["merge_score"] = 1.0 / (rrf_k + rank)
        elif hit.get("merge_score") is None:
            hit["merge_score"] = hit.get("score")
    return out
