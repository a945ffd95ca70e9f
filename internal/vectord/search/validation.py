"""A search request checked once, into the form the engine works on (`check` -> Options).

Nothing here depends on a corpus; nothing after it reads the request. What the wire
type's annotations hold (k, every range) was checked when the request was decoded and
is not checked again; here: the mode and what it needs (its registry entry), the fusion
method and its layers, the query's language, the filter's SQL, `candidates` against
`k`, the field weights together, the preferences' SQL.
"""

from __future__ import annotations

from internal.api import search
from internal.api.vectord import MAX_K, MultiSearchRequest, SearchSpec
from internal.common.errors import InvalidArgument
from internal.common.language import normalize_language
from internal.vectord.search import fusion, fusion_sql, prf
from internal.vectord.search.lexical_options import DEFAULT_CANDIDATES, field_weights
from internal.vectord.search.options import Options, RankerAsk
from internal.vectord.storage.filters import build_where, is_filtered
from internal.vectord.storage.store import Store


def check(store: Store, req: SearchSpec) -> Options:
    """The request as Options (400 naming the field its decoding could not judge)."""
    query_vectors = req.query_vectors if isinstance(req, MultiSearchRequest) else None
    has_vector = req.query_vector is not None or bool(query_vectors)
    mode = search.mode_of(req.mode, bool((req.query_text or "").strip()))
    search.needs(mode, text=req.query_text is not None, vector=has_vector)
    query_text = req.query_text or ""
    if "\x00" in query_text:
        raise InvalidArgument("query_text: must not contain NUL characters", field="query_text")
    method = search.fusion_of(req.fusion)
    where, params = build_where(req.filter)
    n = req.candidates if req.candidates is not None else max(DEFAULT_CANDIDATES, req.k)
    if not req.k <= n <= MAX_K:
        raise InvalidArgument(f"candidates: must be in k..{MAX_K} (k={req.k}), got {n}",
                              field="candidates")
    asked = isinstance(req, MultiSearchRequest) and req.features  # matrixd's, for its ranker
    if asked and not mode.ranked:
        raise InvalidArgument(f"features: mode {mode.name} gives no learned ranker's values",
                              field="features")
    symbolic, sym_params = (None, {}) if req.prefer is None or not mode.fusion else (
        fusion_sql.symbolic_expr(req.prefer))
    cfg = store.cfg
    return Options(
        mode=mode, k=req.k, text=query_text if mode.needs != "vector" else "",
        query_text=query_text, query_vector=req.query_vector,
        query_vectors=query_vectors,
        language=(normalize_language(req.language, "language")
                  if req.language is not None and req.language.strip() else None),
        where=where, params=params, filtered=is_filtered(where),
        k1=cfg.bm25_k1 if req.bm25_k1 is None else req.bm25_k1,
        b=cfg.bm25_b if req.bm25_b is None else req.bm25_b,
        field_weights=field_weights(req.field_weights),
        n=n, rrf_k=cfg.fusion_rrf_k if req.rrf_k is None else req.rrf_k,
        method=method.name if method is not None else fusion.DEFAULT_METHOD,
        fusion_weights=search.layer_weights(req.weights) if mode.fusion else None,
        symbolic=symbolic, sym_params=sym_params,
        ef_search=req.ef_search,
        prf=prf.settings(req.prf), ranker=RankerAsk() if asked else None)
