"""What vectord gives the learned ranker per candidate and per question, when a multi-search
asks for it (`features: true`); a search that does not ask answers without them."""

from __future__ import annotations

import msgspec


class HitFeatures(msgspec.Struct, omit_defaults=True):
    """A candidate's values the ranker needs that the hit does not show: the BM25 of the
    question's own lexemes (hybrid's first pass; `scores.lexical` is the expanded
    query's with pseudo-relevance feedback) and its rank there, the words of its title and
    text, and the share of the question's lexemes (weighted by idf) found in its title and
    in its text. None: not known (not among the first pass's BM25 candidates)."""

    title_words: int
    text_words: int
    title_match: float | None = None
    text_match: float | None = None
    bm25: float | None = None
    bm25_rank: int | None = None


class QueryStats(msgspec.Struct):
    """The question's lexemes over the searched corpora: how many, and their idf's mean
    and largest (None: no lexeme)."""

    lexemes: int
    idf_mean: float | None = None
    idf_max: float | None = None
