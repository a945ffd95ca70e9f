"""Playbook math: feedback entries turned into a bounded boost of matching hits.

An entry says "for a query like this, `answer_id` in `answer_corpus` was good, with
score s in [0, 1]". A hit it matches is boosted by the factor f = 1 - 0.5 * s, so
f is in [0.5, 1]: the cap is a halving of the distance (or a doubling of the score).
- distance-ranked modes: distance' = distance * f (smaller is better)
- score-ranked modes:    score'    = score / f    (larger is better; same factor, same cap)
No I/O here: the server finds the entries, this module decides what they do.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, MutableSequence
from typing import Any, Literal

import msgspec

MIN_FACTOR = 0.5  # the cap: a perfect score halves the distance, never more

Ranking = Literal["distance", "score"]


class PlaybookEntry(msgspec.Struct, forbid_unknown_fields=True):
    """One recorded judgement; stored as the metadata of a playbook-corpus item."""

    query_text: str
    answer_id: str
    answer_corpus: str
    score: float
    tags: list[str] = msgspec.field(default_factory=list)


_encoder = msgspec.json.Encoder()


def validate_score(score: float) -> float:
    """The score itself, or ValueError when it is not a finite number in [0, 1]."""
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ValueError(f"expected a number in [0, 1], got {score!r}")
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise ValueError(f"must be a finite number in [0, 1], got {score!r}")
    return float(score)


def factor(score: float) -> float:
    """The multiplier on a distance for an entry of this score: 1 - 0.5 * score."""
    return 1.0 - 0.5 * validate_score(score)


def playbook_id(query_text: str, answer_id: str, answer_corpus: str) -> str:
    """sha256 of the JSON array [query_text, answer_id, answer_corpus].

    A JSON array is unambiguous where plain concatenation is not ("a|b" + "c" vs
    "a" + "b|c"), so distinct triples never share an id.
    """
    payload = _encoder.encode([query_text, answer_id, answer_corpus])
    return hashlib.sha256(payload).hexdigest()


def entry_to_json(entry: PlaybookEntry) -> bytes:
    return _encoder.encode(entry)


def entry_from_json(raw: bytes | str) -> PlaybookEntry:
    entry = msgspec.json.decode(raw, type=PlaybookEntry)
    validate_score(entry.score)
    return entry


def entry_to_metadata(entry: PlaybookEntry) -> dict[str, Any]:
    """The entry as the JSON object stored in the playbook item's metadata."""
    return msgspec.to_builtins(entry)  # type: ignore[no-any-return]


def entry_from_metadata(meta: Any) -> PlaybookEntry | None:
    """The entry held in a stored item's metadata, or None if it is not a valid one."""
    try:
        entry = msgspec.convert(meta, type=PlaybookEntry)
        validate_score(entry.score)
    except (msgspec.ValidationError, ValueError):
        return None
    return entry


def best_scores(entries: Iterable[PlaybookEntry]) -> dict[tuple[str, str], float]:
    """(answer_corpus, answer_id) -> the highest score among the matching entries."""
    best: dict[tuple[str, str], float] = {}
    for e in entries:
        key = (e.answer_corpus, e.answer_id)
        if key not in best or e.score > best[key]:
            best[key] = e.score
    return best


def apply(hits: MutableSequence[dict[str, Any]], entries: Iterable[PlaybookEntry],
          ranking: Ranking) -> int:
    """Boost the hits the entries match, re-sort in place, return how many were boosted.

    A hit matches on (corpus, id): an entry for the same id in another corpus never
    counts. Every hit gets `boost_factor` (1.0 when unboosted) and `original_distance`;
    score-ranked hits also get `original_merge_score`. The sort is stable, so hits the
    boost does not reorder keep the order the merge gave them.
    """
    best = best_scores(entries)
    boosted = 0
    for hit in hits:
        f = 1.0
        score = best.get((str(hit["corpus"]), str(hit["id"])))
        if score is not None:
            f = factor(score)
        hit["boost_factor"] = f
        hit["original_distance"] = hit.get("distance")
        if ranking == "distance":
            if f != 1.0 and hit.get("distance") is not None:
                hit["distance"] = float(hit["distance"]) * f
                if hit.get("merge_distance") is not None:  # the corpus-weighted distance
                    hit["merge_distance"] = float(hit["merge_distance"]) * f
        else:
            hit["original_merge_score"] = hit.get("merge_score")
            if f != 1.0 and hit.get("merge_score") is not None:
                hit["merge_score"] = float(hit["merge_score"]) / f
        if f != 1.0:
            boosted += 1
    if boosted:
        sort_hits(hits, ranking)
    return boosted


def sort_hits(hits: MutableSequence[dict[str, Any]], ranking: Ranking) -> None:
    """Stable sort by the ranking quantity; hits lacking it go last."""
    if ranking == "distance":
        def key(h: dict[str, Any]) -> tuple[bool, float]:
            d = h.get("merge_distance")
            if d is None:
                d = h.get("distance")
            return (d is None, float(d) if d is not None else 0.0)
    else:
        def key(h: dict[str, Any]) -> tuple[bool, float]:
            s = h.get("merge_score")
            return (s is None, -float(s) if s is not None else 0.0)
    ordered = sorted(hits, key=key)
    hits[:] = ordered
