"""Federated ranking: several corpora's branch lists merged as if they were one corpus (no I/O).

The property this module serves (docs/API.md, DECISIONS.md "Federated search"): a search
over corpora C1..Cn returns the ranking one corpus holding their union would return, each
hit still attributed to its corpus. It holds because
- vector distances of one query vector share one scale, so the union's top n by distance
  is the top n of the corpora's top-n lists merged by distance;
- BM25 is computed by every corpus with the statistics of the union (vectord_bm25_query),
  so lexical scores share one scale too and merge the same way;
- hybrid fusion runs once, over the branch lists merged first (fusion.fuse), never per
  corpus: per-corpus min-max or rank fusion gives every corpus's best hit the same score.
Ties are broken the way the union's SQL breaks them (by id), then by corpus position.

Candidates are named by a key that is unique across corpora and sorts by item id first:
`key(id, position)`. Ids never contain NUL (vectord refuses it), so the separator sorts
below any character of an id.

`corpus_weights` tilt a corpus after fusion, as Meilisearch's federated search does:
score-ranked modes rank by `merge_score = score * w`; vector mode by
`merge_distance = distance / w` (the playbook boost's convention: a weight of 2 counts
like halving the distance). Keyword mode is ordered by time and takes no weight.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_SEP = "\x00"


def _suffix(position: int) -> str:
    return f"{_SEP}{position:06d}"


def key(item_id: str, position: int) -> str:
    """The cross-corpus candidate key of item_id in the corpus at `position`."""
    return item_id + _suffix(position)


def keyed(rows: Iterable[tuple[str, float]], position: int) -> list[tuple[str, float]]:
    """(key, value) of each (item id, value) of the corpus at `position`: `key` with its
    suffix formatted once (a hundred keys: 8 instead of 33 us, four lists a search)."""
    suffix = _suffix(position)
    return [(item_id + suffix, v) for item_id, v in rows]


def unkey(k: str) -> tuple[str, int]:
    """(item id, corpus position) of a key."""
    item_id, _, pos = k.rpartition(_SEP)
    return item_id, int(pos)


def top_by_distance(rows: Sequence[tuple[str, float]], n: int) -> list[tuple[str, float]]:
    """The n nearest (key, distance) rows, nearest first, ties by key."""
    return sorted(rows, key=lambda r: (r[1], r[0]))[:n]


def top_by_score(rows: Sequence[tuple[str, float]], n: int) -> list[tuple[str, float]]:
    """The n best (key, score) rows, best first, ties by key."""
    return sorted(rows, key=lambda r: (-r[1], r[0]))[:n]


def weighted_score(score: float, weight: float) -> float:
    """A score-ranked hit's cross-corpus key: its score times its corpus's weight."""
    return score * weight


def weighted_distance(distance: float, weight: float) -> float:
    """A distance-ranked hit's cross-corpus key: its distance divided by its corpus's weight."""
    return distance / weight
