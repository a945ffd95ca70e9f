"""Pseudo-relevance feedback for hybrid search: the pure part (no I/O).

A first pass ranks the candidates; its top `docs` fused hits are taken as relevant and
the query is moved toward them, then the branches run again and are fused once more:

- **Rocchio** on the query vector: q' = q/|q| + w · mean(d/|d|) over the feedback
  documents, rescaled to |q| (Rocchio 1971 with γ = 0, as dense PRF uses it).
- **RM3** on the lexical query (Lavrenko & Croft 2001; Abdul-Jaleel et al. 2004): the
  relevance model P(t|R) = Σ_d P(d) · tf(t, d) / |d|, P(d) the feedback document's share
  of the first-pass fused score; its best `terms` lexemes are mixed with the query's own
  model P(t|Q) = qtf / |Q| as (P(t|Q) + w · P(t|R)) / (1 + w), and each lexeme's BM25
  weight is idf · that probability (the original lexemes' qtf is its |Q|-scaled form).

`w` is the feedback's weight against the original query's 1 in both. The SQL that reads
the feedback documents' vectors and lexemes lives in internal.vectord.search.reads.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from internal.api.vectord import Prf
from internal.vectord.search.union_merge import Key


@dataclass(frozen=True)
class Settings:
    docs: int
    terms: int
    weight: float
    vector: bool
    # Feedback only when the corpora searched hold at least this many documents (0: always).
    min_docs: int = 0
    # Asked by the request: applies to every question (the default's gate is skipped).
    asked: bool = False

    @property
    def on(self) -> bool:
        return self.docs > 0 and self.weight > 0 and (self.vector or self.terms > 0)


# The default when a request sends no `prf` (on only if it wins on the mean of
# the three dev sets and loses on none by more than 0.005;
# docs/decisions/0038-default-hybrid-search.md): RM3 from the
# top 10 fused hits, 10 expansion lexemes, weight 0.5, query vector unchanged. Measured
# over the default fusion with MAX_DF_SHARE: mean nDCG@10 0.5495 -> 0.5633 (SciFact
# -0.0022, Cranfield +0.017, CISI +0.027) for 2.7x the hybrid latency; `"prf": {"docs": 0}`
# turns it off.
# The default stays off below 100 documents (10x its feedback set): there the "top 10" is
# a tenth of the corpus or all of it, not a sample of the relevant part, and feedback only
# blurs the query (an explicit `prf` is always applied).
DEFAULT = Settings(docs=10, terms=10, weight=0.5, vector=False, min_docs=100)


def settings(given: Prf | None) -> Settings:
    """The request's feedback settings (in range by the wire type), or the default."""
    if given is None:
        return DEFAULT
    return Settings(given.docs, given.terms, float(given.weight), given.vector, asked=True)


def rocchio(query: npt.NDArray[np.float32], docs: Sequence[npt.NDArray[np.float32]],
            weight: float) -> npt.NDArray[np.float32]:
    """q/|q| + weight · mean of the unit document vectors, scaled back to |q|."""
    norm = float(np.linalg.norm(query))
    if not docs or norm == 0 or weight <= 0:
        return query
    units = [d.astype(np.float64) / n for d in docs if (n := float(np.linalg.norm(d))) > 0]
    if not units:
        return query
    moved: npt.NDArray[np.float64] = (query.astype(np.float64) / norm
                                      + weight * np.mean(np.stack(units), axis=0))
    size = float(np.linalg.norm(moved))
    if size == 0:
        return query
    return (moved / size * norm).astype(np.float32)


def idf(df: float, n: float) -> float:
    """BM25's idf, as vectord_bm25_query computes it."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def relevance_model(docs: Mapping[Key, Mapping[str, float]], doc_weights: Mapping[Key, float]
                    ) -> dict[str, float]:
    """P(t|R) = Σ_d P(d) · tf(t, d) / |d|; P(d) are doc_weights normalised to sum 1."""
    total = sum(max(0.0, doc_weights.get(d, 0.0)) for d in docs)
    out: dict[str, float] = {}
    get = out.get
    for d in sorted(docs):  # a fixed order: the same sums whichever corpus answered first
        tfs = docs[d]
        length = sum(tfs.values())
        if length <= 0:
            continue
        pd = (max(0.0, doc_weights.get(d, 0.0)) / total) if total > 0 else 1.0 / len(docs)
        for t, tf in tfs.items():
            out[t] = get(t, 0.0) + pd * tf / length
    return out


def best_first(model: Mapping[str, float], k: int) -> list[str]:
    """The model's lexemes best first, ties by lexeme: the first k at least (all of them
    when k reaches their number), with every lexeme weighing as much as the k-th. The
    very prefix of sorting them all (two sorts in C, by lexeme and then stably by
    weight), from a partition and the sort of the few: a thousand lexemes, 0.08 against
    0.27 ms."""
    if 0 < k < len(model):
        weights = np.fromiter(model.values(), dtype=np.float64, count=len(model))
        kth = float(np.partition(weights, weights.size - k)[weights.size - k])
        picked = [t for t, w in model.items() if w >= kth]
    else:
        picked = list(model)
    return sorted(sorted(picked), key=model.__getitem__, reverse=True)


# RM3 leaves out feedback lexemes found in more than this share of the documents (the
# query's own lexemes always stay): their idf is small (< 1.4 at 25%), so they barely move a
# ranking, but their postings are the longest (on a corpus with a 21-word vocabulary they
# cut hybrid QPS to 0.36x of no feedback; 0.55x with this cap). 0.1 cost SciFact 0.004.
MAX_DF_SHARE = 0.25


def without_common(model: Mapping[str, float], df: Mapping[str, float], n: float,
                   keep: Collection[str], share: float = MAX_DF_SHARE) -> dict[str, float]:
    """The relevance model without lexemes in more than `share` of the n documents, except
    those in `keep` (the query's own)."""
    return {t: p for t, p in model.items() if t in keep or df.get(t, 0.0) <= share * n}


def expand(query_tf: Mapping[str, float], model: Mapping[str, float], terms: int,
           weight: float) -> dict[str, float]:
    """The mixed query model: (P(t|Q) + w · P(t|R)) / (1 + w) over the query's lexemes
    and the relevance model's best `terms` (ties by lexeme), summing to 1."""
    qsum = sum(query_tf.values())
    best = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]
    rsum = sum(p for _, p in best)
    mixed: dict[str, float] = {}
    for t, tf in query_tf.items():
        if qsum > 0:
            mixed[t] = tf / qsum / (1 + weight)
    for t, p in best:
        if rsum > 0:
            mixed[t] = mixed.get(t, 0.0) + weight * p / rsum / (1 + weight)
    return mixed


# Selective feedback (Cronen-Townsend et al. 2004; Amati et al. 2004: expansion helps a
# vague question and can harm a precise one), decided on the first pass's evidence before
# any feedback read, so a skipped pass costs nothing (docs/decisions/0223).
MIN_LEXEMES = 3  # a question of fewer lexemes is a name or two: nothing to expand
SKIP_WHEN_NAMED = True  # a question that names an item (search/names.py) has its answer
# A question read as character bigrams (Chinese, Japanese): over the tldr pages feedback
# changed none of its answers once the blind vector layer weighed little; skipped, it
# costs nothing.
SKIP_BIGRAMS = True


def worth_expanding(lexemes: int, named: bool, bigrams: bool = False) -> bool:
    """Whether feedback's pass may help this question. lexemes: its lexemes held by the
    corpora; named: it names an item by title or id; bigrams: most of its letters are Han
    or kana (read as character bigrams)."""
    if lexemes < MIN_LEXEMES:
        return False
    if SKIP_WHEN_NAMED and named:
        return False
    return not (SKIP_BIGRAMS and bigrams)
