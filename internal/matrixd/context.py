"""A turn judged with its neighbours: conversation context in smart search's ranking (I/O-free).

A dialogue turn rarely carries its whole meaning: "It's a beginner class, fundamentals
and breathing" answers "What kind of yoga is it?" one turn earlier, and a question about
the yoga class finds the question's words there, not in the answer. So a hit that sits in
a thread (metadata `group`, e.g. a session) at a position (metadata `position`, e.g. the
turn's number) borrows part of the scores its neighbours earned in the same ranking: the
turn before counts most (the question a turn answers), the turn after less, two away
less again. Hits without both fields keep their scores unchanged.

This is query-time contextual retrieval: the neighbours must be in the ranking to lend
anything, so smart search asks each sub-query for a deeper list (smart.SUB_QUERY_DEPTH).
Measured on LoCoMo's dev half (hybrid's top 100 re-ranked; DECISIONS.md, issue 17):
overall evidence R@10 0.684 -> 0.738, single-hop 0.753 -> 0.844, multi-hop 0.435 -> 0.410.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Share of a neighbour's score a turn borrows, by offset (-1: the turn before).
NEIGHBOUR_WEIGHTS: Mapping[int, float] = {-1: 0.5, 1: 0.3, -2: 0.2, 2: 0.2}
GROUP = "session"  # metadata field naming the thread a turn belongs to
POSITION = "turn"  # metadata field holding the turn's number in its thread


def place(hit: Mapping[str, Any], group: str = GROUP, position: str = POSITION
          ) -> tuple[str, str, str, int] | None:
    """(corpus, thread, position) of a hit, or None when its metadata lacks either."""
    meta = hit.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    g, p = meta.get(group), meta.get(position)
    if g is None or isinstance(p, bool):
        return None
    if isinstance(p, str) and p.strip().lstrip("-").isdigit():
        p = int(p)
    if not isinstance(p, int):
        return None
    return str(hit.get("corpus")), str(hit.get("id")), str(g), p


def smooth(hits: Sequence[dict[str, Any]], *, group: str = GROUP, position: str = POSITION,
           weights: Mapping[int, float] = NEIGHBOUR_WEIGHTS) -> list[dict[str, Any]]:
    """The hits re-ranked by score + the weighted scores of their neighbours in this list.

    Every hit is copied with "context_score"; the order is by it, ties in the given
    order. A list where no hit has a place comes back in its order, scores untouched.
    """
    places = [place(h, group, position) for h in hits]
    at: dict[tuple[str, str, int], float] = {}
    for h, pl in zip(hits, places, strict=True):
        if pl is not None:
            at.setdefault((pl[0], pl[2], pl[3]), _score(h))
    out: list[tuple[float, int, dict[str, Any]]] = []
    for i, (h, pl) in enumerate(zip(hits, places, strict=True)):
        s = _score(h)
        if pl is not None:
            s += sum(w * at.get((pl[0], pl[2], pl[3] + off), 0.0) for off, w in weights.items())
        out.append((s, i, {**h, "context_score": s}))
    if not at:
        return [h for _, _, h in out]
    out.sort(key=lambda t: (-t[0], t[1]))
    return [h for _, _, h in out]


def _score(hit: Mapping[str, Any]) -> float:
    s = hit.get("score")
    return float(s) if isinstance(s, int | float) and not isinstance(s, bool) else 0.0
