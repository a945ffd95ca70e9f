"""Hybrid search fused in Python: weighted, dbsf, and any fusion with soft preferences.

RRF without preferences stays in one SQL statement (lexical_search.search_hybrid).
Here one statement returns both branches' candidates (ids and branch scores only,
plus each candidate's symbolic score when `prefer` is given), internal.vectord.fusion
ranks them, and a second statement reads the top k items.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from internal.common.errors import InvalidArgument
from internal.vectord import fusion, hits, lexical, schema
from internal.vectord.filters import build_clauses
from internal.vectord.models import Corpus, Filter, Hit, SearchRequest
from internal.vectord.store import Store

_CANDIDATES = """
WITH {vec}, {bm25}
SELECT coalesce(vec.id, lex.id) AS id, vec.distance AS vec_distance, vec.rank AS vec_rank,
       lex.score AS lex_score, lex.rank AS lex_rank, {symbolic} AS sym_score
FROM vec FULL JOIN lex ON lex.id = vec.id"""

_ITEMS = "SELECT {columns} FROM {table} i WHERE i.id = ANY(%(ids)s)"


def symbolic_expr(prefer: Filter) -> tuple[sql.Composable, dict[str, Any]]:
    """Share of the preferences an item meets, over the items table's columns."""
    clauses, params = build_clauses(prefer, "prefer", "p_")
    if not clauses:
        raise InvalidArgument("prefer: give at least one preference", field="prefer")
    met = sql.SQL(" + ").join(sql.SQL("coalesce(({})::int, 0)").format(c) for c in clauses)
    return sql.SQL("(({})::float8 / {})").format(met, sql.Literal(len(clauses))), params


def candidates_sql(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
                   where: sql.Composable, filtered: bool, operator: str | None,
                   symbolic: sql.Composable | None) -> sql.Composed:
    """Both branches' candidates, as lexical.hybrid_sql builds them, without fusing."""
    vec = (sql.SQL(lexical._VEC_NONE) if operator is None
           else sql.SQL(lexical._VEC).format(op=sql.SQL(operator), table=table, where=where))
    sym: sql.Composable = sql.SQL("NULL::float8")
    if symbolic is not None:
        sym = sql.SQL("(SELECT {e} FROM {t} WHERE {t}.id = coalesce(vec.id, lex.id))").format(
            e=symbolic, t=table)
    return sql.SQL(_CANDIDATES).format(
        vec=vec, bm25=lexical._bm25(table, corpus_id, languages, where, filtered), symbolic=sym)


def fusion_weights(req: SearchRequest) -> dict[str, float] | None:
    """The request's layer weights, checked (None: the method's default)."""
    if req.weights is None:
        return None
    try:
        fusion.normalise_weights(req.weights, fusion.LAYERS)
    except ValueError as exc:
        field, _, _ = str(exc).partition(":")
        raise InvalidArgument(str(exc), field=field) from None
    return dict(req.weights)


async def search(store: Store, corpus: Corpus, req: SearchRequest, where: sql.Composable,
                 params: dict[str, Any], *, text: str, query: Any, languages: list[str] | None,
                 bm25: dict[str, object], n: int, rrf_k: int, ef_search: int,
                 filtered: bool, method: str) -> list[Hit]:
    """Candidates from SQL, fused here by `method`, top k read back."""
    weights = fusion_weights(req)
    symbolic, sym_params = (None, {}) if req.prefer is None else symbolic_expr(req.prefer)
    table = schema.items_table(corpus.id)
    stmt = candidates_sql(table, corpus.id, languages, where, filtered,
                          None if query is None else schema.OPERATOR[corpus.metric], symbolic)
    args = {**params, **sym_params, **bm25, "vec_q": query, "vec_n": n}
    async with store.pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await store.search_settings(conn, max(ef_search, n), filtered)
        await cur.execute(stmt, args)
        rows = await cur.fetchall()
        vec = sorted((r for r in rows if r["vec_rank"] is not None), key=lambda r: r["vec_rank"])
        lex = sorted((r for r in rows if r["lex_rank"] is not None), key=lambda r: r["lex_rank"])
        distance = {r["id"]: float(r["vec_distance"]) for r in vec}
        branches = {
            fusion.VECTOR: [(r["id"], hits.similarity(corpus.metric, distance[r["id"]])) for r in vec],
            fusion.LEXICAL: [(r["id"], float(r["lex_score"])) for r in lex],
        }
        sym = None if symbolic is None else {r["id"]: float(r["sym_score"] or 0.0) for r in rows}
        fused = fusion.fuse(method, branches, k=rrf_k, weights=weights, symbolic=sym)[:req.k]
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(sql.SQL(_ITEMS).format(columns=sql.SQL(lexical.ITEM_COLUMNS),
                                                 table=table),
                          {"ids": [f.id for f in fused]})
        items = {row["id"]: row for row in await cur.fetchall()}
    out = []
    for f in fused:
        row = items.get(f.id)
        if row is None:
            continue  # deleted between the two statements
        out.append(hits.hit(corpus, row, distance=distance.get(f.id), score=f.score,
                            ranks=dict(f.ranks), scores=dict(f.scores),
                            matched_layers=list(f.matched_layers)))
    return out

