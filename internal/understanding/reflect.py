"""Reflection: do the results answer the question, and what to search for next (I/O-free).

Adequate means every sub-query that carries the question (the original and its parts,
when they run with vectors) has a hit above the confidence bar, every named entity is mentioned by one of the
top hits, and a question that gathers several facts (aggregation, multi-hop) has
more than one hit above the bar. What is missing is searched again, and only that:
an unanswered sub-query with the terms of its best hits added (pseudo-relevance
feedback), an unseen entity with the question's topic words.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from spacy.lang.en.stop_words import STOP_WORDS

from internal.api.responses import RankedHit
from internal.understanding.analyze import Analysis
from internal.understanding.plan import WEIGHTS, Plan, SubQuery, mentions
from lakehouse.wire.modes import MODES

MissingKind = Literal["sub_query", "entity", "support"]
FEEDBACK_HITS = 3  # best hits a refinement takes its terms from
FEEDBACK_TERMS = 4
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]+")


@dataclass(frozen=True)
class Missing:
    kind: MissingKind
    target: str  # the sub-query's text or the entity's name
    reason: str
    sub_query: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "target": self.target, "reason": self.reason}
        if self.sub_query is not None:
            out["sub_query"] = self.sub_query
        return out


@dataclass(frozen=True)
class Assessment:
    adequate: bool
    missing: list[Missing]


def confidence(hit: RankedHit) -> float:
    """How surely a hit answers its query: the vector similarity (0 when it has none)."""
    sim = hit.scores.get("vector")
    return float(sim) if sim is not None else 0.0


def assess(a: Analysis, plan: Plan, results: dict[int, list[RankedHit]],
           fused: list[RankedHit], bar: float, k: int) -> Assessment:
    """What the results so far leave unanswered (see the module docstring)."""
    missing: list[Missing] = []
    refined_for = {q.refines for q in plan.sub_queries if q.refines is not None}
    for sq in plan.sub_queries:
        # Readings in a mode without vectors (lexical) have no similarity to judge; the
        # question they read is judged.
        if (sq.purpose not in ("original", "part") or not MODES[sq.layer].embeds
                or sq.id not in results):
            continue
        hits = results[sq.id]
        best = max((confidence(h) for h in hits), default=0.0)
        # A refinement that ran counts for the sub-query it completes.
        for q in plan.sub_queries:
            if q.refines == sq.id and q.id in results:
                best = max(best, *(confidence(h) for h in results[q.id]), 0.0)
        if best < bar:
            missing.append(Missing("sub_query", sq.text,
                                   f"best hit similarity {best:.3f} < {bar}", sq.id))
    top = fused[:k]
    for name in plan.entities:
        if not any(mentions(h, name) for h in top):
            missing.append(Missing("entity", name, f"no top-{k} hit mentions {name!r}"))
    if a.question_type in ("aggregation", "multi-hop") and 0 not in refined_for:
        strong = sum(1 for h in top if confidence(h) >= bar)
        if strong < 2:
            missing.append(Missing("support", a.query,
                                   f"{a.question_type} question: {strong} hit(s) above {bar}", 0))
    return Assessment(not missing, missing)


def feedback_terms(hits: list[RankedHit], exclude: set[str], n: int = FEEDBACK_TERMS
                   ) -> list[str]:
    """Words of the best hits not in the query: the ones shared by more hits first."""
    df: Counter[str] = Counter()
    order: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for h in hits[:FEEDBACK_HITS]:
        seen: set[str] = set()
        for w in _WORD.findall(h.text or ""):
            low = w.lower().strip("'’-")
            if (len(low) < 3 or low in STOP_WORDS or low in exclude or low in seen
                    or low.endswith(("'s", "’s"))):
                continue
            seen.add(low)
            df[low] += 1
            order.setdefault(low, len(order))
            spelled.setdefault(low, w.strip("'’-"))
    ranked = sorted(df, key=lambda w: (-df[w], order[w]))
    return [spelled[w] for w in ranked[:n]]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def refine(a: Analysis, plan: Plan, found: Assessment, results: dict[int, list[RankedHit]],
           fused: list[RankedHit], tried: set[str]) -> list[SubQuery]:
    """New sub-queries for what is missing, none already tried; ids continue the plan's."""
    out: list[SubQuery] = []
    next_id = len(plan.sub_queries)
    names = {n.lower() for n in plan.entities}
    for m in found.missing:
        if m.kind in ("sub_query", "support") and m.sub_query is not None:
            base = next(q for q in plan.sub_queries if q.id == m.sub_query)
            hits = results.get(base.id) or fused
            extra = feedback_terms(hits, _words(base.text) | names)
            if not extra:
                continue
            text = f"{base.text} {' '.join(extra)}"
            sq = SubQuery(next_id, text, "hybrid", "refined", WEIGHTS["refined"], base.prefer,
                          refines=base.id)
        elif m.kind == "entity":
            topic = [t for t in a.terms if t.lower() not in names]
            if not topic:
                continue
            text = " ".join([m.target, *topic])
            sq = SubQuery(next_id, text, "lexical", "refined", WEIGHTS["refined"],
                          must_match=[m.target], refines=-1)
        else:
            continue
        if text.lower() in tried:
            continue
        tried.add(text.lower())
        out.append(sq)
        next_id += 1
    return out
