"""Federated ranking: several corpora's branch lists merged as if they were one corpus (no I/O).

The property this module serves (docs/API.md, docs/decisions/0047-federated-search-is-the-union.md): a search
over corpora C1..Cn returns the ranking one corpus holding their union would return, each
hit still attributed to its corpus. It holds because
- vector distances of one query vector share one scale, so the union's top n by distance
  is the top n of the corpora's top-n lists merged by distance;
- BM25 is computed by every corpus with the statistics of the union (vectord_bm25_query),
  so lexical scores share one scale too and merge the same way;
- hybrid fusion runs once, over the branch lists merged first (fusion.fuse), never per
  corpus: per-corpus min-max or rank fusion gives every corpus's best hit the same score.
Ties are broken the way the union's SQL breaks them (by id), then by corpus position.

A candidate is named by its `Key`, (item id, corpus position): unique across corpora,
and ordered by item id first, then position.

`corpus_weights` tilt a corpus after fusion, as Meilisearch's federated search does:
score-ranked modes rank by `merge_score = score * w`; distance-ranked modes by
`merge_distance = distance / w` (the playbook boost's convention: a weight of 2 counts
like halving the distance). Modes merged newest first take no weight.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from internal.api.vectord import Hit
from lakehouse.wire.modes import Merge

Key = tuple[str, int]  # (item id, corpus position)


def keyed(rows: Iterable[tuple[str, float]], position: int) -> list[tuple[Key, float]]:
    """(key, value) of each (item id, value) of the corpus at `position`."""
    return [((item_id, position), v) for item_id, v in rows]


def top_by_distance(rows: Sequence[tuple[Key, float]], n: int) -> list[tuple[Key, float]]:
    """The n nearest (key, distance) rows, nearest first, ties by key."""
    return sorted(rows, key=lambda r: (r[1], r[0]))[:n]


def top_by_score(rows: Sequence[tuple[Key, float]], n: int) -> list[tuple[Key, float]]:
    """The n best (key, score) rows, best first, ties by key."""
    return sorted(rows, key=lambda r: (-r[1], r[0]))[:n]


def weighted_score(score: float, weight: float) -> float:
    """A score-ranked hit's cross-corpus key: its score times its corpus's weight."""
    return score * weight


def weighted_distance(distance: float, weight: float) -> float:
    """A distance-ranked hit's cross-corpus key: its distance divided by its corpus's weight."""
    return distance / weight


def merged_hits(found: Iterable[tuple[int, float, Sequence[Hit]]], merge: Merge
                ) -> list[Hit]:
    """The hits of several corpora (position, weight, hits) in one ranking by the mode's
    rule: by distance (merge_distance set), by score (merge_score set) or newest first
    (no weight; the most exact keyword match before, `scores["keyword"]`); ties by id,
    then position."""
    rows: list[tuple[tuple[float, float], str, int, Hit]] = []
    for position, w, hits in found:
        for h in hits:
            if merge == "distance":
                assert h.distance is not None
                h.merge_distance = weighted_distance(h.distance, w)
                rows.append(((h.merge_distance, 0.0), h.id, position, h))
            elif merge == "score":
                assert h.score is not None
                h.merge_score = weighted_score(h.score, w)
                rows.append(((-h.merge_score, 0.0), h.id, position, h))
            else:  # the most exact match first (keyword's exactness), then newest
                exact = h.scores.get("keyword") or 0.0
                rows.append(((-exact, -h.updated_at.timestamp()), h.id, position, h))
    rows.sort(key=lambda r: r[:3])
    return [r[3] for r in rows]

