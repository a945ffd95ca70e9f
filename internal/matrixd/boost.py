"""Playbook math: feedback entries turned into a bounded boost of matching hits.

An entry says "for a query like this, `answer_id` in `answer_corpus` was good (s > 0)
or wrong (s < 0), with score s in [-1, 1]". A hit it matches gets the factor
f = 1 - 0.5 * s, so f is in [0.5, 1.5]: a perfect score at most halves a distance (or
doubles a score), a wrong mark at most multiplies it by 1.5 (or divides a score by 1.5).
- distance-ranked modes: distance' = distance * f (smaller is better)
- score-ranked modes:    score'    = score / f    (larger is better; same factor, same cap)
Several entries for one answer: among entries of one sign the strongest wins (the highest
of positive ones, as before negative scores existed; the lowest of negative ones); when
both signs match, the entry whose recorded question is nearer the query wins.
No I/O here: the server finds the entries, this module decides what they do.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, MutableSequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import msgspec

from internal.api.responses import RankedHit
from internal.api.vectord import Hit

MIN_SCORE, MAX_SCORE = -1.0, 1.0
T = TypeVar("T")

Ranking = Literal["distance", "score"]


class PlaybookEntry(msgspec.Struct, forbid_unknown_fields=True):
    """One recorded judgement; stored as the metadata of a playbook-corpus item. An answer
    that is a document (the id its writer gave) judges each of its chunks: `chunks` are
    their ids when it was recorded (for the playbook's recall), and a hit matches it by
    its `document_id` too."""

    query_text: str
    answer_id: str
    answer_corpus: str
    score: float
    tags: list[str] = msgspec.field(default_factory=list)
    chunks: list[str] | msgspec.UnsetType = msgspec.UNSET  # absent for an item's entry


@dataclass(frozen=True)
class Match:
    """An entry found for a query, with its recorded question's distance to the query."""

    entry: PlaybookEntry
    distance: float


_encoder = msgspec.json.Encoder()


def validate_score(score: float) -> float:
    """The score itself, or ValueError when it is not a finite number in [-1, 1]."""
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ValueError(f"expected a number in [-1, 1], got {score!r}")
    if not math.isfinite(score) or not MIN_SCORE <= score <= MAX_SCORE:
        raise ValueError(f"must be a finite number in [-1, 1], got {score!r}")
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


def _as_match(e: PlaybookEntry | Match) -> Match:
    # A bare entry (no distance known) counts as recorded for this very query.
    return e if isinstance(e, Match) else Match(e, 0.0)


def best_scores(entries: Iterable[PlaybookEntry | Match]) -> dict[tuple[str, str], float]:
    """(answer_corpus, answer_id) -> the score that decides, per the rule in the module doc.

    Same sign: the strongest (highest positive, lowest negative). Both signs: the entry
    nearest the query; on equal distance the first given (lookups give nearest first).
    A score of 0 counts with the positive ones, as it always did.
    """
    groups: dict[tuple[str, str], list[Match]] = {}
    for e in entries:
        m = _as_match(e)
        groups.setdefault((m.entry.answer_corpus, m.entry.answer_id), []).append(m)
    best: dict[tuple[str, str], float] = {}
    for key, ms in groups.items():
        pos = [m.entry.score for m in ms if m.entry.score >= 0]
        neg = [m.entry.score for m in ms if m.entry.score < 0]
        if not neg:
            best[key] = max(pos)
        elif not pos:
            best[key] = min(neg)
        else:
            nearest = ms[0]
            for m in ms[1:]:
                if m.distance < nearest.distance:
                    nearest = m
            best[key] = nearest.entry.score
    return best


def disputed(entries: Iterable[PlaybookEntry | Match]) -> set[tuple[str, str]]:
    """(answer_corpus, answer_id) of every answer some matching entry marks wrong (s < 0)."""
    return {(m.entry.answer_corpus, m.entry.answer_id) for m in map(_as_match, entries)
            if m.entry.score < 0}


def judged(judgements: Mapping[tuple[str, str], T], hit: Hit) -> T | None:
    """What the entries say of a hit: of its own id, else of its document's (a document
    recorded as the answer judges each of its chunks)."""
    found = judgements.get((hit.corpus, hit.id))
    if found is None and hit.document_id is not None:
        found = judgements.get((hit.corpus, hit.document_id))
    return found


def apply(hits: MutableSequence[RankedHit], entries: Iterable[PlaybookEntry | Match],
          ranking: Ranking, in_fusion: bool = False) -> int:
    """Apply the entries' factors to the hits they match, re-sort in place.

    Returns how many hits were boosted (factor < 1); hits pushed down by a wrong mark
    (factor > 1) show as `boost_factor` > 1 and are not counted.

    A hit matches on (corpus, id): an entry for the same id in another corpus never
    counts. Every hit gets `boost_factor` (1.0 when untouched) and `original_distance`;
    score-ranked hits also get `original_merge_score`. The sort is stable and keeps the
    downgrade gate's groups (a hit with `downgraded` reasons stays below every hit
    without), so hits the boost does not reorder keep the order they came in.

    in_fusion: the factors were already applied inside the fusion (hybrid: vectord scaled
    the answer's distance and BM25 before fusing, see `include`), so the hits only say
    their factor; their merge_score already holds it.
    """
    best = best_scores(entries)
    boosted = changed = 0
    for hit in hits:
        f = 1.0
        score = judged(best, hit)
        if score is not None:
            f = factor(score)
        hit.boost_factor = f
        hit.original_distance = hit.distance
        if ranking == "distance":
            if f != 1.0 and hit.distance is not None:
                hit.distance = hit.distance * f
                if hit.merge_distance is not None:  # the corpus-weighted distance
                    hit.merge_distance = hit.merge_distance * f
        else:
            hit.original_merge_score = hit.merge_score
            if f != 1.0 and hit.merge_score is not None and not in_fusion:
                hit.merge_score = hit.merge_score / f
        if f != 1.0:
            changed += 1
        if f < 1.0:
            boosted += 1
    if changed and not in_fusion:
        sort_hits(hits, ranking)
    return boosted


def sort_hits(hits: MutableSequence[RankedHit], ranking: Ranking) -> None:
    """Stable sort by the ranking quantity within the downgrade groups; hits lacking it go last."""
    if ranking == "distance":
        def key(h: RankedHit) -> tuple[bool, bool, float]:
            d = h.merge_distance  # the corpus-weighted distance, when vectord set one
            if d is None:
                d = h.distance
            return (bool(h.downgraded), d is None, d if d is not None else 0.0)
    else:
        def key(h: RankedHit) -> tuple[bool, bool, float]:
            s = h.merge_score
            return (bool(h.downgraded), s is None, -s if s is not None else 0.0)
    ordered = sorted(hits, key=key)
    hits[:] = ordered


_WORD = re.compile(r"\w+")


def word_distance(query: str, recorded: str) -> float:
    """1 - the Jaccard similarity of the two questions' lower-cased word sets: 0 for the
    same words, 1 for none shared. The playbook's stand-in for the vector distance when
    the query is not embedded; on the same [0, 1] side of `playbook_max_distance` as a
    cosine distance for the questions that matter (the same question reworded a little)."""
    a = set(_WORD.findall(query.lower()))
    b = set(_WORD.findall(recorded.lower()))
    if not a or not b:
        return 1.0
    return 1.0 - len(a & b) / len(a | b)
