"""The request-wide checks of a search (`check` -> Options): nothing here depends on a corpus."""

from __future__ import annotations

from internal.api.vectord import MAX_K, SearchRequest
from internal.common.errors import InvalidArgument
from internal.vectord.search import fusion, fusion_sql, prf
from internal.vectord.search.lexical_options import DEFAULT_CANDIDATES, bm25_options, query_text
from internal.vectord.search.options import Options, RankerAsk
from internal.vectord.storage.filters import build_where, is_filtered
from internal.vectord.storage.store import Store


def check(store: Store, req: SearchRequest) -> Options:
    """Check the request-wide fields its decoding cannot (400 naming one); nothing here
    depends on a corpus. What the wire type's annotations hold (k, mode, ef_search, every
    range) was checked when the request was decoded, and is not checked again."""
    where, params = build_where(req.filter)
    text = ""
    if req.mode == "keyword":
        text = query_text(req, "keyword") if req.query_text is not None else ""
    elif req.mode == "lexical":
        text = query_text(req, "lexical")
    elif req.mode == "hybrid":
        if req.query_text is None and req.query_vector is None and not req.query_vectors:
            raise InvalidArgument(
                "query_text: mode 'hybrid' needs query_text, query_vector or both",
                field="query_text")
        text = query_text(req, "hybrid") if req.query_text is not None else ""
    elif req.query_vector is None and not req.query_vectors:
        raise InvalidArgument("query_vector: required for mode 'vector'", field="query_vector")
    k1, b, fw = bm25_options(store, req)
    # Its range is the wire type's (SearchRequest.rrf_k) and the config's: checked there.
    rrf_k = store.cfg.rrf_k if req.rrf_k is None else req.rrf_k
    n = req.candidates if req.candidates is not None else max(DEFAULT_CANDIDATES, req.k)
    if not req.k <= n <= MAX_K:
        raise InvalidArgument(f"candidates: must be in k..{MAX_K} (k={req.k}), got {n}",
                              field="candidates")
    asked = getattr(req, "features", False)  # a multi-search's (matrixd's) only
    if asked and req.mode != "hybrid":
        raise InvalidArgument("features: the learned ranker's values are a hybrid search's",
                              field="features")
    symbolic, sym_params = (None, {}) if req.prefer is None or req.mode != "hybrid" else (
        fusion_sql.symbolic_expr(req.prefer))
    return Options(req=req, where=where, params=params, filtered=is_filtered(where), text=text,
                k1=k1, b=b, field_weights=fw, n=n, rrf_k=rrf_k,
                method=req.fusion or fusion.DEFAULT_METHOD,
                fusion_weights=fusion_sql.fusion_weights(req), symbolic=symbolic,
                sym_params=sym_params,
                ef_search=req.ef_search if req.ef_search is not None else store.cfg.ef_search,
                prf=prf.settings(req.prf), ranker=RankerAsk() if asked else None)
