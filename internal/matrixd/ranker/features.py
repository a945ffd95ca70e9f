"""Features of (question, candidate) pairs for the learned ranker (no I/O).

One row per fused candidate of a hybrid search, from what the search computed: each
layer's score, its share of the best and its rank (the fused score with the playbook's
boost inside, the vector similarity, the hybrid's lexical score, which with
pseudo-relevance feedback is the expanded query's BM25, and the plain BM25 of the
question's own lexemes, which vectord gives apart as `HitFeatures.bm25`); whether
retrieval found it (0: only the playbook's recall); the playbook's entries near the
question (boost.Match: the similarity of the nearest recorded questions that marked the
candidate right or wrong, how many did, the rule's deciding score); the item's words and
the idf-weighted share of the question's lexemes in its title and its text; the
question's lexemes and their idf. A missing value is NaN, which a gradient-boosted tree
sends down its learned side. docs/API.md lists them.

Out of fold: a ranker trained on recorded questions must not see a question's own record
in that question's features, or it learns to trust the record and nothing else. Records
are put in folds by a hash of their recorded question (`fold_of`), so every record of one
question text lands in one fold, and `out_of_fold` drops the matches of the question's
own fold.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from internal.api.ranker import HitFeatures, QueryStats
from internal.api.vectord import Hit
from internal.matrixd import boost
from internal.matrixd.boost import Match

NAN = math.nan
FOLDS = 5

# The row's columns, in order. Groups: the layers, the playbook, the item, the question.
LAYER_FEATURES = (
    "fused", "fused_rel", "fused_rank",
    "vector_sim", "vector_gap", "vector_rank",
    "lexical", "lexical_rel", "lexical_rank",
    "bm25", "bm25_rel", "bm25_rank",
    "retrieved",
)
PLAYBOOK_FEATURES = (
    "pb_pos_sim", "pb_pos_n", "pb_pos_sum", "pb_neg_sim", "pb_neg_n", "pb_best",
    "pb_pos_gap", "pb_entries", "pb_nearest_sim",
)
ITEM_FEATURES = ("doc_words", "title_words", "title_match", "text_match")
QUERY_FEATURES = ("q_words", "q_idf_mean", "q_idf_max")
FEATURES: tuple[str, ...] = LAYER_FEATURES + PLAYBOOK_FEATURES + ITEM_FEATURES + QUERY_FEATURES

Rows = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Signal:
    """What the playbook's matching entries say about one answer."""

    pos_sim: float = 0.0  # similarity of the nearest question that marked it right (0: none)
    pos_n: int = 0
    pos_sum: float = 0.0
    neg_sim: float = 0.0
    neg_n: int = 0
    best: float = 0.0  # boost.best_scores: the score the fixed rule decides by


def signals(matches: Iterable[Match]) -> dict[tuple[str, str], Signal]:
    """(answer_corpus, answer_id) -> the entries' signal for that answer."""
    ms = list(matches)
    best = boost.best_scores(ms)
    acc: dict[tuple[str, str], list[float]] = {}
    for m in ms:
        key = (m.entry.answer_corpus, m.entry.answer_id)
        a = acc.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
        sim = 1.0 - m.distance
        if m.entry.score >= 0:
            a[0] = max(a[0], sim)
            a[1] += 1
            a[2] += sim
        else:
            a[3] = max(a[3], sim)
            a[4] += 1
    return {key: Signal(a[0], int(a[1]), a[2], a[3], int(a[4]), best[key])
            for key, a in acc.items()}


def fold_of(question: str, folds: int = FOLDS) -> int:
    """The fold of a recorded question: sha256 of its text, so all its records share one."""
    return int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big") % folds


def out_of_fold(matches: Iterable[Match], question: str, folds: int = FOLDS) -> list[Match]:
    """The matches a training question may see: none recorded in its own fold (its own
    records among them)."""
    own = fold_of(question, folds)
    return [m for m in matches if fold_of(m.entry.query_text, folds) != own]


def playbook_columns(hits: Sequence[Hit], matches: Sequence[Match]) -> list[list[float]]:
    """The PLAYBOOK_FEATURES of each hit: the part of a row that depends on the records."""
    sig = signals(matches)
    nearest = max((1.0 - m.distance for m in matches), default=0.0)
    entries = float(len(matches))
    none = Signal()
    out = []
    for h in hits:
        s = boost.judged(sig, h) or none
        out.append([s.pos_sim, float(s.pos_n), s.pos_sum, s.neg_sim, float(s.neg_n), s.best,
                    s.pos_sim - nearest if s.pos_n else NAN, entries, nearest])
    return out


def _col(values: Sequence[float | int | None]) -> npt.NDArray[np.float64]:
    return np.asarray([NAN if v is None else v for v in values], dtype=np.float64)


def _share(col: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each value over the column's best (NaN where missing, or when the best is not > 0)."""
    top = np.nanmax(col) if np.isfinite(col).any() else NAN
    if not top > 0:
        return np.full(col.shape, NAN)
    return col / top


def rows(hits: Sequence[Hit], extras: Sequence[HitFeatures | None], matches: Sequence[Match],
         query: QueryStats | None) -> Rows:
    """One row of FEATURES per hit, as a (hits, features) array; hits in the order the
    search ranked them (fused, the boost inside), extras[i] vectord's values for hits[i]."""
    n = len(hits)
    out = np.full((n, len(FEATURES)), NAN)
    if not n:
        return out
    none = HitFeatures(title_words=0, text_words=0)
    ex = [e if e is not None else none for e in extras]
    fused = _col([h.score for h in hits])
    vec = _col([h.scores.get("vector") for h in hits])
    lex = _col([h.scores.get("lexical") for h in hits])
    bm25 = _col([e.bm25 for e in ex])
    top_vec = np.nanmax(vec) if np.isfinite(vec).any() else NAN
    cols = [
        fused, _share(fused), np.arange(1, n + 1, dtype=np.float64),
        vec, vec - top_vec, _col([h.ranks.get("vector") for h in hits]),
        lex, _share(lex), _col([h.ranks.get("lexical") for h in hits]),
        bm25, _share(bm25), _col([e.bm25_rank for e in ex]),
        _col([0.0 if (h.included is True or getattr(h, "from_playbook", False) is True)
              else 1.0 for h in hits]),
    ]
    out[:, :len(cols)] = np.column_stack(cols)
    at = len(LAYER_FEATURES)
    out[:, at:at + len(PLAYBOOK_FEATURES)] = np.asarray(playbook_columns(hits, matches))
    at += len(PLAYBOOK_FEATURES)
    out[:, at:at + len(ITEM_FEATURES)] = np.column_stack([
        _col([e.text_words for e in ex]), _col([e.title_words for e in ex]),
        _col([e.title_match for e in ex]), _col([e.text_match for e in ex])])
    at += len(ITEM_FEATURES)
    if query is not None:
        out[:, at:] = [float(query.lexemes), NAN if query.idf_mean is None else query.idf_mean,
                       NAN if query.idf_max is None else query.idf_max]
    return out
