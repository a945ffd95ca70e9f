"""Options of the `lexical` (BM25) and `hybrid` modes: languages, field weights, candidates.

The searches themselves are internal.vectord.search.engine (one path for one or many corpora).
"""

from __future__ import annotations

from collections.abc import Sequence

from internal.api.vectord import Corpus, FieldWeights
from internal.common.errors import InvalidArgument
from internal.common.language import AUTO
from internal.vectord.lexical import sql_index
from internal.vectord.search.options import Options

# How many hits each hybrid branch feeds the fusion when the request does not say:
# at least this many, and never fewer than k.
DEFAULT_CANDIDATES = 100


def query_languages(p: Options, corpus: Corpus) -> list[str] | None:
    """The query's regconfigs: its own, else the corpus's; None: every corpus language.

    A corpus with language "auto" holds items stemmed in several languages; a short
    query is too little text to detect reliably, so its words are stemmed in each
    language the corpus holds (plus "simple") and the lexemes OR-ed. A document only
    carries lexemes of its own language, so only the right stem of a word matches it.
    """
    if p.language is not None:
        return [p.language]
    if corpus.language != AUTO:
        return [corpus.language]
    return None


def field_weights(given: FieldWeights | None) -> dict[str, float]:
    """BM25's field weights (each in range by the wire type); at least one above 0."""
    if given is None:
        return dict(sql_index.DEFAULT_FIELD_WEIGHTS)
    weights = {"title": given.title, "text": given.text, "tags": given.tags}
    if not any(weights.values()):
        raise InvalidArgument("field_weights: at least one weight must be > 0",
                              field="field_weights")
    return weights


def union_languages(p: Options, corpora: Sequence[Corpus]) -> tuple[list[str], list[bool]]:
    """Fixed query languages of the union, and which corpora stem in all they hold (auto)."""
    if p.language is not None:
        return [p.language], [False] * len(corpora)
    fixed = sorted({c.language for c in corpora if c.language != AUTO})
    return fixed, [c.language == AUTO for c in corpora]
