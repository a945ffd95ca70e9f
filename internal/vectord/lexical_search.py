"""The `lexical` (BM25) and `hybrid` (vector + BM25, fused by RRF) search modes."""

from __future__ import annotations

import math
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from internal.common.errors import InvalidArgument
from internal.vectord import fusion, fusion_search, hits, lexical, schema, validate
from internal.vectord.filters import is_filtered
from internal.vectord.language import AUTO, normalize_language
from internal.vectord.models import MAX_K, Corpus, Hit, SearchRequest
from internal.vectord.store import Store

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


def _bm25_options(store: Store, req: SearchRequest) -> tuple[float, float, dict[str, float]]:
    k1 = store.cfg.bm25_k1 if req.bm25_k1 is None else req.bm25_k1
    b = store.cfg.bm25_b if req.bm25_b is None else req.bm25_b
    if not math.isfinite(k1) or k1 < 0:
        raise InvalidArgument(f"bm25_k1: must be a finite number >= 0, got {k1}", field="bm25_k1")
    if not math.isfinite(b) or not 0 <= b <= 1:
        raise InvalidArgument(f"bm25_b: must be in [0, 1], got {b}", field="bm25_b")
    weights = dict(lexical.DEFAULT_FIELD_WEIGHTS)
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


def _query_text(req: SearchRequest, mode: str) -> str:
    if req.query_text is None:
        raise InvalidArgument(f"query_text: required for mode {mode!r}", field="query_text")
    if "\x00" in req.query_text:
        raise InvalidArgument("query_text: must not contain NUL characters", field="query_text")
    return req.query_text


async def search_lexical(store: Store, corpus: Corpus, req: SearchRequest,
                         where: sql.Composable, params: dict[str, Any]) -> list[Hit]:
    """BM25 over the corpus's postings; the query's lexemes are OR-ed."""
    text = _query_text(req, "lexical")
    langs = query_languages(req, corpus)
    k1, b, weights = _bm25_options(store, req)
    if not text.strip():
        return []
    table = schema.items_table(corpus.id)
    stmt = lexical.lexical_sql(table, corpus.id, langs, where, is_filtered(where))
    args = {**params, **lexical.bm25_params(text, langs, k1, b, weights, req.k)}
    async with store.pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(stmt, args)
        rows = await cur.fetchall()
    return [hits.hit(corpus, row, score=float(row["lex_score"]),
                     ranks={"lexical": int(row["lex_rank"])},
                     scores={"lexical": float(row["lex_score"])}) for row in rows]


async def search_hybrid(store: Store, corpus: Corpus, req: SearchRequest,
                        where: sql.Composable, params: dict[str, Any]) -> list[Hit]:
    """Vector (HNSW) and BM25 branches fused by RRF in one SQL statement."""
    # Either input may be missing (its branch is then empty), but not both.
    if req.query_text is None and req.query_vector is None:
        raise InvalidArgument("query_text: mode 'hybrid' needs query_text, query_vector or both",
                              field="query_text")
    text = _query_text(req, "hybrid") if req.query_text is not None else ""
    query = (None if req.query_vector is None else
             validate.vector(req.query_vector, corpus.dim, corpus.metric, "query_vector"))
    langs = query_languages(req, corpus)
    k1, b, weights = _bm25_options(store, req)
    rrf_k = store.cfg.rrf_k if req.rrf_k is None else req.rrf_k
    if rrf_k < 1:
        raise InvalidArgument(f"rrf_k: must be >= 1, got {rrf_k}", field="rrf_k")
    n = req.candidates if req.candidates is not None else max(DEFAULT_CANDIDATES, req.k)
    if not req.k <= n <= MAX_K:
        raise InvalidArgument(f"candidates: must be in k..{MAX_K} (k={req.k}), got {n}",
                              field="candidates")
    filtered = is_filtered(where)
    ef_search = req.ef_search if req.ef_search is not None else store.cfg.ef_search
    method = req.fusion or fusion.DEFAULT_METHOD
    if method != "rrf" or req.prefer is not None:
        # weighted, dbsf and soft preferences are fused in Python (issue 8).
        return await fusion_search.search(
            store, corpus, req, where, params, text=text, query=query, languages=langs,
            bm25=lexical.bm25_params(text, langs, k1, b, weights, n), n=n, rrf_k=rrf_k,
            ef_search=ef_search, filtered=filtered, method=method)
    table = schema.items_table(corpus.id)
    stmt = lexical.hybrid_sql(table, corpus.id, langs, where, filtered,
                              None if query is None else schema.OPERATOR[corpus.metric])
    args = {**params, **lexical.bm25_params(text, langs, k1, b, weights, n),
            "vec_q": query, "vec_n": n, "rrf_k": rrf_k, "k": req.k}
    async with store.pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        # hnsw returns at most ef_search rows, so it must cover the candidates.
        await store.search_settings(conn, max(ef_search, n), filtered)
        await cur.execute(stmt, args)
        rows = await cur.fetchall()
    out = []
    for row in rows:
        distance = None if row["vec_distance"] is None else float(row["vec_distance"])
        lex_score = None if row["lex_score"] is None else float(row["lex_score"])
        out.append(hits.hit(
            corpus, row, distance=distance, score=float(row["fused_score"]),
            ranks={"vector": row["vec_rank"], "lexical": row["lex_rank"]},
            scores={"vector": None if distance is None
                    else hits.similarity(corpus.metric, distance),
                    "lexical": lex_score}))
    return out
