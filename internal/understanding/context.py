"""A turn judged with its neighbours: conversation context in smart search's ranking (I/O-free).

A dialogue turn rarely carries its whole meaning: "It's a beginner class, fundamentals
and breathing" answers "What kind of yoga is it?" one turn earlier, and a question about
the yoga class finds the question's words there, not in the answer. So a hit that sits in
a thread (metadata `group`, e.g. a session) at a position (metadata `position`, e.g. the
turn's number) borrows part of the scores (`merge_score`, else `score`) its neighbours
earned in the same ranking: the turn before counts most (the question a turn answers),
the turn after less, two away less again. Hits without both fields, or indexed with
their neighbours already (metadata `context_window`, set by `windows`' callers), keep
their scores unchanged.

This is query-time contextual retrieval: the neighbours must be in the ranking to lend
anything, so smart search asks each sub-query for a deeper list (smart.SUB_QUERY_DEPTH).
Measured on LoCoMo's dev half (hybrid's top 100 re-ranked;
docs/decisions/0063-context-reranking.md):
overall evidence R@10 0.684 -> 0.738, single-hop 0.753 -> 0.844, multi-hop 0.435 -> 0.410.

The same idea at ingest time is `windows`: a turn indexed (embedded and BM25-indexed)
with the turns around it in its thread, which `lakehouse ingest --normalize` does for
documents that name their thread (LoCoMo, hybrid: 0.685 -> 0.769 overall R@10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI's --help loads this module and no wire struct (tests/cli/test_startup.py)
    from internal.api.responses import RankedHit

# Share of a neighbour's score a turn borrows, by offset (-1: the turn before).
NEIGHBOUR_WEIGHTS: Mapping[int, float] = {-1: 0.5, 1: 0.3, -2: 0.2, 2: 0.2}
GROUP = "session"  # metadata field naming the thread a turn belongs to
POSITION = "turn"  # metadata field holding the turn's number in its thread
# Metadata key of an item indexed with its neighbours ("BEFORE:AFTER"): re-ranking it
# with them again would count them twice.
WINDOW_KEY = "context_window"


def place(hit: RankedHit, group: str = GROUP, position: str = POSITION
          ) -> tuple[str, str, int] | None:
    """(corpus, thread, position) of a hit, or None when its metadata lacks either."""
    meta = hit.metadata
    if WINDOW_KEY in meta:
        return None  # no place, or indexed with its neighbours already (`windows`)
    g, p = meta.get(group), meta.get(position)
    if g is None or isinstance(p, bool):
        return None
    if isinstance(p, str) and p.strip().lstrip("-").isdigit():
        p = int(p)
    if not isinstance(p, int):
        return None
    return hit.corpus, str(g), p


def smooth(hits: Sequence[RankedHit], *, group: str = GROUP, position: str = POSITION,
           weights: Mapping[int, float] = NEIGHBOUR_WEIGHTS) -> list[RankedHit]:
    """The hits re-ranked by score + the weighted scores of their neighbours in this list.

    Every hit is copied with its `context_score`; the order is by it, ties in the given
    order. A list where no hit has a place comes back in its order, scores untouched.
    """
    places = [place(h, group, position) for h in hits]
    at: dict[tuple[str, str, int], float] = {}
    for h, pl in zip(hits, places, strict=True):
        if pl is not None:
            at.setdefault(pl, _score(h))
    out: list[tuple[float, int, RankedHit]] = []
    for i, (h, pl) in enumerate(zip(hits, places, strict=True)):
        s = _score(h)
        if pl is not None:
            corpus, thread, pos = pl
            s += sum(w * at.get((corpus, thread, pos + off), 0.0) for off, w in weights.items())
        out.append((s, i, _with_context_score(h, s)))
    if not at:
        return [h for _, _, h in out]
    out.sort(key=lambda t: (-t[0], t[1]))
    return [h for _, _, h in out]


# Turns before and after a turn that `lakehouse ingest --normalize` indexes with it.
WINDOW_BEFORE = 2
WINDOW_AFTER = 1


def windows(texts: Sequence[str], threads: Sequence[object | None],
            before: int = WINDOW_BEFORE, after: int = WINDOW_AFTER) -> list[str]:
    """Each text followed by its neighbours' (the list's order, the same thread), one a line.

    A text whose thread is None stays as it is and lends itself to no other; neighbours
    are taken only up to the first text of another thread on each side.
    """
    if len(texts) != len(threads):
        raise ValueError("windows: texts and threads differ in length")
    if before < 0 or after < 0:
        raise ValueError("windows: before and after must not be negative")
    out: list[str] = []
    for i, (text, thread) in enumerate(zip(texts, threads, strict=True)):
        if thread is None:
            out.append(text)
            continue
        lo = i
        while lo > 0 and i - lo < before and threads[lo - 1] == thread:
            lo -= 1
        hi = i
        while hi + 1 < len(texts) and hi - i < after and threads[hi + 1] == thread:
            hi += 1
        around = [texts[j] for j in range(lo, hi + 1) if j != i]
        out.append("\n".join([text, *around]) if around else text)
    return out


def _score(hit: RankedHit) -> float:
    """The key the list is ranked by: `merge_score` (corpus weights and the playbook's
    factor applied) when the hit has one, else `score`."""
    s = hit.merge_score if hit.merge_score is not None else hit.score
    return float(s) if s is not None else 0.0


def _with_context_score(hit: RankedHit, score: float) -> RankedHit:
    import msgspec  # loaded by the searches that smooth, never by the CLI's start

    return msgspec.structs.replace(hit, context_score=score)
