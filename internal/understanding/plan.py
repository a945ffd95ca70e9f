"""Smart-search planning and the merge of its sub-queries' results (I/O-free).

A plan turns an analysis into sub-queries, each with a target layer (the search
mode it runs in), its soft preferences and the sub-queries it depends on; the merge
is a weighted reciprocal-rank fusion over the sub-queries' rankings, with a bonus
for hits that mention the question's entities and, for temporal questions, for hits
that state a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from internal.api.responses import RankedHit
from internal.understanding import temporal
from internal.understanding.analyze import Analysis

Layer = str  # the search mode a sub-query runs in (lakehouse.wire.modes)
Purpose = Literal["original", "part", "entity", "refined"]

RRF_K = 60
# Weight of each purpose in the fusion: the question itself and its parts lead;
# entity-focused lexical queries and reflection's refinements add evidence.
WEIGHTS: dict[str, float] = {"original": 1.0, "part": 0.8, "entity": 0.5, "refined": 0.6}
ENTITY_BONUS = 0.25  # merge score x (1 + bonus x share of the question's entities mentioned)
TIME_BONUS = 0.2  # temporal questions: merge score x (1 + bonus) for a hit that states a time
# Questions that gather facts from several places: at most this many of the top k hits
# from one source (title, e.g. one session or one page) before the others get a turn.
# Measured on LoCoMo's dev half: spreading cost single-hop recall more than it gained
# multi-hop, so no question type spreads by default.
SPREAD_TYPES: tuple[str, ...] = ()
PER_SOURCE = 3
# The question's own ranking is the backbone: its first KEEP_TOP hits keep their places
# and the sub-queries' evidence fills the places after them (LoCoMo: fusing everything
# re-ranked single-hop answers out of the top 10).
KEEP_TOP = 5
# Metadata key where normalised items keep the dates their text was anchored to.
DATES_KEY = "dates"
# A hit said by a person the question names (metadata "speaker", any case): merge score
# x (1 + bonus). LoCoMo's dev half, hybrid's ranking re-ranked
# (docs/decisions/0065-speaker-bonus.md):
# on the normalised index with context windows overall R@10 0.769 -> 0.798, multi-hop
# 0.417 -> 0.486; on the spoken index +0.001.
SPEAKER_KEY = "speaker"
SPEAKER_BONUS = 0.2


@dataclass
class SubQuery:
    id: int
    text: str
    layer: Layer
    purpose: Purpose
    weight: float
    prefer: dict[str, Any] | None = None
    # A hit counts for this sub-query only if its text mentions every name here
    # (the entities as a lexical must-match preference).
    must_match: list[str] = field(default_factory=list)
    depends_on: list[int] = field(default_factory=list)
    refines: int | None = None  # the sub-query (or -1: an entity) a refinement completes

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "query": self.text, "layer": self.layer,
                               "purpose": self.purpose, "weight": self.weight,
                               "filters": {"prefer": self.prefer, "must_match": self.must_match},
                               "depends_on": self.depends_on}
        if self.refines is not None:
            out["refines"] = self.refines
        return out


@dataclass
class Plan:
    sub_queries: list[SubQuery]
    execution: Literal["parallel", "sequential"]
    entities: list[str]
    time_cue: bool  # a temporal question: prefer hits that state a time
    date_preference: dict[str, Any] | None
    merge: str = "weighted_rrf"
    per_source: int = 0  # > 0: spread the top hits over sources (see PER_SOURCE)
    persons: list[str] = field(default_factory=list)  # a hit they said gets SPEAKER_BONUS

    def to_dict(self) -> dict[str, Any]:
        return {"sub_queries": [q.to_dict() for q in self.sub_queries],
                "execution": self.execution,
                "merge": {"strategy": self.merge, "rrf_k": RRF_K, "weights": WEIGHTS,
                          "entity_bonus": ENTITY_BONUS if self.entities else 0.0,
                          "time_bonus": TIME_BONUS if self.time_cue else 0.0,
                          "speaker_bonus": SPEAKER_BONUS if self.persons else 0.0,
                          "per_source": self.per_source or None, "keep_top": KEEP_TOP},
                "entities": self.entities, "persons": self.persons,
                "date_preference": self.date_preference}


def _merge_prefer(user: dict[str, Any] | None, ours: dict[str, Any]) -> dict[str, Any] | None:
    """The caller's preferences win over the plan's on the same key."""
    out = {**ours, **(user or {})}
    return out or None


def make_plan(a: Analysis, *, date_field: str = "date", user_prefer: dict[str, Any] | None = None,
              max_parts: int = 3) -> Plan:
    """Sub-queries for one analysed question (see the module docstring)."""
    ours: dict[str, Any] = {}
    date_pref: dict[str, Any] | None = None
    rng = a.temporal_range
    if rng is not None and date_field:
        date_pref = {"field": date_field}
        # vectord's date filter takes RFC 3339 date-times; a date is its midnight UTC.
        if rng.start:
            date_pref["after"] = f"{rng.start.isoformat()}T00:00:00Z"
        if rng.end:
            date_pref["before"] = f"{rng.end.isoformat()}T00:00:00Z"
        ours["date"] = date_pref
    time_cue = a.question_type == "temporal"
    if time_cue:
        ours["has"] = [DATES_KEY]  # normalised items that anchored a date
    prefer = _merge_prefer(user_prefer, ours)
    subs = [SubQuery(0, a.query, "hybrid", "original", WEIGHTS["original"], prefer)]
    if len(a.sub_queries) >= 2:
        # Keyword readings (no structure to split on) are term matches: lexical, which
        # also spares an embedding each; real parts of the question run hybrid.
        layer: Layer = "lexical" if a.split == "readings" else "hybrid"
        for i, text in enumerate(a.sub_queries[:max_parts]):
            deps = [1 + d for d, j in a.dependencies if j == i]
            subs.append(SubQuery(len(subs), text, layer, "part", WEIGHTS["part"],
                                 prefer if layer == "hybrid" else None, depends_on=deps))
    named = [e.name for e in a.entities if e.type != "unknown"]
    topic = [t for t in a.terms if t not in named]
    if named and topic:
        subs.append(SubQuery(len(subs), " ".join([*named, *topic]), "lexical", "entity",
                             WEIGHTS["entity"], must_match=named))
    sequential = any(q.depends_on for q in subs)
    return Plan(subs, "sequential" if sequential else "parallel",
                [e.name for e in a.entities], time_cue, date_pref,
                per_source=PER_SOURCE if a.question_type in SPREAD_TYPES else 0,
                persons=persons_of(a))


def waves(subs: list[SubQuery], done: set[int]) -> list[list[SubQuery]]:
    """Sub-queries in waves: each wave's dependencies all ran in earlier waves."""
    out: list[list[SubQuery]] = []
    ran = set(done)
    left = [q for q in subs if q.id not in ran]
    while left:
        ready = [q for q in left if all(d in ran for d in q.depends_on)]
        if not ready:  # a cycle cannot come from make_plan; run the rest together
            ready = left
        out.append(ready)
        ran |= {q.id for q in ready}
        left = [q for q in left if q.id not in ran]
    return out


# ---- merge --------------------------------------------------------------------------------

def hit_text(hit: RankedHit) -> str:
    return f"{hit.title or ''}\n{hit.text or ''}"


def mentions(hit: RankedHit, name: str) -> bool:
    """The hit's title or text names `name` (whole words, any case)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", hit_text(hit), re.IGNORECASE) is not None


def states_time(hit: RankedHit) -> bool:
    if hit.metadata.get(DATES_KEY):
        return True
    return temporal.TIME_CUE.search(hit.text or "") is not None


def said_by(hit: RankedHit, persons: list[str]) -> bool:
    """The hit's metadata speaker is one of the persons (any case)."""
    who = hit.metadata.get(SPEAKER_KEY)
    return isinstance(who, str) and who.strip().casefold() in {p.casefold() for p in persons}


def persons_of(a: Analysis) -> list[str]:
    """The names a hit's speaker is matched against (spaCy's small model leaves some
    names untyped, "Maria": they count too)."""
    return [e.name for e in a.entities if e.type in ("person", "unknown")]


def prefer_speakers(hits: list[RankedHit], persons: list[str],
                    score: Callable[[RankedHit], float | None] = lambda h: h.score
                    ) -> list[RankedHit]:
    """One ranking re-ordered by score(hit) x (1 + SPEAKER_BONUS) for a hit said by one
    of the persons (search_auto's hybrid; smart_search applies the bonus in its merge)."""
    if not persons:
        return hits

    def value(h: RankedHit) -> float:
        v = score(h)
        base = float(v) if v is not None else 0.0
        return base * (1 + SPEAKER_BONUS) if said_by(h, persons) else base

    order = sorted(range(len(hits)), key=lambda i: (-value(hits[i]), i))
    return [hits[i] for i in order]


def key(hit: RankedHit) -> tuple[str, str]:
    return hit.corpus, hit.id


def fuse(runs: list[tuple[SubQuery, list[RankedHit]]], plan: Plan) -> list[RankedHit]:
    """Every sub-query's hits in one ranking: weighted RRF, then the entity and time
    bonuses; each hit a copy, its `merge_score` and `sub_queries` the fusion's."""
    score: dict[tuple[str, str], float] = {}
    first: dict[tuple[str, str], RankedHit] = {}
    found_by: dict[tuple[str, str], list[int]] = {}
    for sq, hits in runs:
        rank = 0
        for h in hits:
            if sq.must_match and not all(mentions(h, n) for n in sq.must_match):
                continue
            rank += 1
            k = key(h)
            score[k] = score.get(k, 0.0) + sq.weight / (RRF_K + rank)
            first.setdefault(k, h)
            found_by.setdefault(k, []).append(sq.id)
    out = []
    for k, s in score.items():
        h = first[k]
        if plan.entities:
            share = sum(mentions(h, n) for n in plan.entities) / len(plan.entities)
            s *= 1 + ENTITY_BONUS * share
        if plan.time_cue and states_time(h):
            s *= 1 + TIME_BONUS
        if plan.persons and said_by(h, plan.persons):
            s *= 1 + SPEAKER_BONUS
        out.append(msgspec.structs.replace(h, merge_score=s, sub_queries=found_by[k]))
    out.sort(key=lambda h: (-(h.merge_score or 0.0), key(h)))
    if plan.per_source > 0:
        out = spread(out, plan.per_source)
    backbone = next((hits for sq, hits in runs if sq.purpose == "original"), [])
    if KEEP_TOP > 0 and backbone:
        keep = [key(h) for h in backbone[:KEEP_TOP]]
        by_key = {key(h): h for h in out}
        head = [by_key[k] for k in keep if k in by_key]
        out = head + [h for h in out if key(h) not in set(keep)]
    # A hit the spread or the kept head placed above better-scored ones shows the best
    # score below it: scores read in the order of the ranks (ties, never an inversion).
    floor = 0.0
    for h in reversed(out):
        floor = max(floor, h.merge_score or 0.0)
        h.merge_score = floor
    for i, h in enumerate(out):
        h.rank = i + 1
    return out


def spread(hits: list[RankedHit], per_source: int) -> list[RankedHit]:
    """The same hits, no source (corpus + title) more than per_source times before every
    other source's hits are placed; order within each pass kept."""
    seen: dict[tuple[str, str], int] = {}
    first: list[RankedHit] = []
    later: list[RankedHit] = []
    for h in hits:
        src = (h.corpus, h.title or h.id)
        seen[src] = seen.get(src, 0) + 1
        (first if seen[src] <= per_source else later).append(h)
    return first + later
