"""Options of the `lexical` (BM25) and `hybrid` modes: languages, BM25 parameters, query text.

The searches themselves are internal.vectord.search.engine (one path for one or many corpora).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from internal.api.vectord import Corpus, SearchRequest
from internal.common.errors import InvalidArgument
from internal.common.language import AUTO, normalize_language
from internal.vectord.lexical import sql_index
from internal.vectord.storage.store import Store

# How many hits each hybrid branch feeds the fusion when the request does not say:
# at least this many, and never fewer than k.
DEFAULT_CANDIDATES = 100


def query_languages(req: SearchRequest, corpus: Corpus) -> list[str] | None:
    """The query's regconfigs: its own, else the corpus's; None: every corpus language.

    A corpus with language "auto" holds items stemmed in several languages; a short
    query is too little text to detect reliably, so its words are stemmed in each
    language the corpus holds (plus "simple") and the lexemes OR-ed. A document only
    carries lexemes of its own language, so only the right stem of a word matches it.
    """
    if req.language is not None and req.language.strip():
        return [normalize_language(req.language, "language")]
    if corpus.language != AUTO:
        return [corpus.language]
    return None


def bm25_options(store: Store, req: SearchRequest) -> tuple[float, float, dict[str, float]]:
    k1 = store.cfg.bm25_k1 if req.bm25_k1 is None else req.bm25_k1
    b = store.cfg.bm25_b if req.bm25_b is None else req.bm25_b
    if not math.isfinite(k1) or k1 < 0:
        raise InvalidArgument(f"bm25_k1: must be a finite number >= 0, got {k1}", field="bm25_k1")
    if not math.isfinite(b) or not 0 <= b <= 1:
        raise InvalidArgument(f"bm25_b: must be in [0, 1], got {b}", field="bm25_b")
    weights = dict(sql_index.DEFAULT_FIELD_WEIGHTS)
    if req.field_weights is not None:
        fw = req.field_weights
        weights = {"title": fw.title, "text": fw.text, "tags": fw.tags}
        for name, w in weights.items():
            if not math.isfinite(w) or w < 0:
                raise InvalidArgument(f"field_weights.{name}: must be a finite number >= 0",
                                      field=f"field_weights.{name}")
        if not any(weights.values()):
            raise InvalidArgument("field_weights: at least one weight must be > 0",
                                  field="field_weights")
    return k1, b, weights


def query_text(req: SearchRequest, mode: str) -> str:
    if req.query_text is None:
        raise InvalidArgument(f"query_text: required for mode {mode!r}", field="query_text")
    if "\x00" in req.query_text:
        raise InvalidArgument("query_text: must not contain NUL characters", field="query_text")
    return req.query_text


def union_languages(req: SearchRequest, corpora: Sequence[Corpus]) -> tuple[list[str], list[bool]]:
    """Fixed query languages of the union, and which corpora stem in all they hold (auto)."""
    if req.language is not None and req.language.strip():
        langs = query_languages(req, corpora[0])
        return list(langs or []), [False] * len(corpora)
    fixed = sorted({c.language for c in corpora if c.language != AUTO})
    return fixed, [c.language == AUTO for c in corpora]
