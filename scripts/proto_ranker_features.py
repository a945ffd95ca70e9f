"""The prototype's features of (question, candidate) pairs (no I/O), counted from the texts
of the data sets; the service computes them from a search (internal.matrixd.ranker.features).

One row per fused candidate of a search, from what the search already computed: each
layer's score and rank (`Hit.ranks` / `Hit.scores`: the vector layer, the hybrid's
lexical layer, which with pseudo-relevance feedback on is the expanded query's BM25, and
the fused `Hit.score`), the plain BM25 of the question's own words (the first pass, which
a hybrid hit does not show: given apart as `Bm25`), the playbook's entries near the
question (boost.Match: the similarity of the nearest recorded questions that marked the
candidate right or wrong, how many did, the rule's deciding score), the item's (length,
the question's words in its title and text, age) and the question's (length, its words'
IDF). A missing value is NaN (a layer that did not find the candidate), which a
gradient-boosted tree sends down its learned side.

Out of fold: a ranker trained on recorded questions must not see a question's own record
in that question's features, or it learns to trust the record and nothing else. Records
are put in folds by a hash of their recorded question (`fold_of`), so every record of one
question text lands in one fold, and `out_of_fold` drops the matches of the question's
own fold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from internal.api.vectord import Hit
from internal.matrixd.boost import Match
from internal.matrixd.ranker import features as service

# The playbook's part is the service's own (internal.matrixd.ranker.features).
Signal, signals, fold_of = service.Signal, service.signals, service.fold_of
out_of_fold, playbook_columns = service.out_of_fold, service.playbook_columns

NAN = math.nan

# The row's columns, in order: the service's, and the item's age (left out of its model).
LAYER_FEATURES, PLAYBOOK_FEATURES = service.LAYER_FEATURES, service.PLAYBOOK_FEATURES
ITEM_FEATURES = (*service.ITEM_FEATURES, "age_days")
QUERY_FEATURES = service.QUERY_FEATURES
FEATURES: tuple[str, ...] = LAYER_FEATURES + PLAYBOOK_FEATURES + ITEM_FEATURES + QUERY_FEATURES

_WORD = re.compile(r"\w+")


def words(text: str | None) -> list[str]:
    """Lower-cased words, as the ranker's match features count them."""
    return _WORD.findall(text.lower()) if text else []


def idf(df: float, n: float) -> float:
    """BM25's idf: ln(1 + (n - df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Question:
    """The question's distinct words and each one's idf over the searched corpora."""

    terms: tuple[str, ...]
    idf: Mapping[str, float]

    @classmethod
    def of(cls, text: str, df: Mapping[str, float], n: float) -> Question:
        terms = tuple(dict.fromkeys(words(text)))
        return cls(terms, {t: idf(df.get(t, 0.0), n) for t in terms})

    def features(self) -> list[float]:
        values = [self.idf[t] for t in self.terms]
        if not values:
            return [0.0, NAN, NAN]
        return [float(len(self.terms)), sum(values) / len(values), max(values)]

    def match(self, text: str | None) -> float:
        """The idf-weighted share of the question's words found in the text (0..1), each
        as a substring of the lower-cased text ("cell" finds "cells": a stemmer's stand-in
        that costs a C-level search, where tokenising 100 abstracts costs milliseconds)."""
        total = sum(self.idf.values())
        if total <= 0:
            return NAN
        low = text.lower() if text else ""
        return sum(w for t, w in self.idf.items() if t in low) / total


@dataclass(frozen=True)
class Bm25:
    """A candidate's BM25 for the question's own words, and its rank in that list."""

    score: float | None
    rank: int | None


def _rel(value: float | None, top: float) -> float:
    if value is None:
        return NAN
    return value / top if top > 0 else NAN


def _opt(value: float | int | None) -> float:
    return NAN if value is None else float(value)


def rows(question: Question, hits: Sequence[Hit], matches: Sequence[Match],
         bm25: Mapping[tuple[str, str], Bm25], now: datetime) -> list[list[float]]:
    """One row of FEATURES per hit; hits in the fused order, best first."""
    top_fused = max((h.score for h in hits if h.score is not None), default=0.0)
    vec = [h.scores.get("vector") for h in hits]
    top_vec = max((s for s in vec if s is not None), default=NAN)
    lex = [h.scores.get("lexical") for h in hits]
    top_lex = max((s for s in lex if s is not None), default=0.0)
    plain = [bm25.get((h.corpus, h.id), Bm25(None, None)) for h in hits]
    top_bm25 = max((b.score for b in plain if b.score is not None), default=0.0)
    qf = question.features()
    out = []
    for i, (h, pb) in enumerate(zip(hits, playbook_columns(hits, matches), strict=True)):
        v, b = vec[i], plain[i]
        recalled = h.included is True or getattr(h, "from_playbook", False) is True
        out.append([
            _opt(h.score), _rel(h.score, top_fused), float(i + 1),
            _opt(v), v - top_vec if v is not None else NAN, _opt(h.ranks.get("vector")),
            _opt(lex[i]), _rel(lex[i], top_lex), _opt(h.ranks.get("lexical")),
            _opt(b.score), _rel(b.score, top_bm25), _opt(b.rank),
            0.0 if recalled else 1.0,
            *pb,
            float(len(h.text.split())), float(len(h.title.split()) if h.title else 0),
            question.match(h.title),
            question.match(h.text), (now - h.updated_at).total_seconds() / 86400.0,
            *qf,
        ])
    return out
