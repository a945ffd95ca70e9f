"""The SQL of hybrid search's candidates: both branches' ids and scores, no fusion.

One statement per corpus returns its vector and BM25 candidates (ids and branch scores
only, plus each candidate's symbolic score when `prefer` is given); internal.vectord.
federated merges them across corpora, internal.vectord.search.fusion ranks them (the one place
fusion runs, rrf included), and `ITEMS` reads the top k back.
"""

from __future__ import annotations

import functools
from typing import Any

from psycopg import sql

from internal.api.vectord import Filter
from internal.common.errors import InvalidArgument
from internal.vectord import tables
from internal.vectord.lexical import sql_index, versions
from internal.vectord.storage.filters import build_clauses

_CANDIDATES = """
WITH {vec}, {bm25}
SELECT coalesce(vec.id, lex.id) AS id, vec.distance AS vec_distance, vec.rank AS vec_rank,
       lex.score AS lex_score, lex.rank AS lex_rank, {symbolic} AS sym_score{matched}
FROM vec FULL JOIN lex ON lex.id = vec.id"""

ITEMS = "SELECT {columns} FROM {table} i WHERE i.id = ANY(%(ids)s)"
# The same, with the corpus's lexical version (versions.VERSION_OF) on every row: the
# check of a search that scored from the in-memory index without reading it first.
ITEMS_AT_VERSION = "SELECT {columns}, {version} FROM {table} i WHERE i.id = ANY(%(ids)s)"


def symbolic_expr(prefer: Filter) -> tuple[sql.Composable, dict[str, Any]]:
    """Share of the preferences an item meets, over the items table's columns."""
    clauses, params = build_clauses(prefer, "prefer", "p_")
    if not clauses:
        raise InvalidArgument("prefer: give at least one preference", field="prefer")
    met = sql.SQL(" + ").join(sql.SQL("coalesce(({})::int, 0)").format(c) for c in clauses)
    return sql.SQL("(({})::float8 / {})").format(met, sql.Literal(len(clauses))), params


LEX_NONE = """
lex AS (SELECT NULL::text AS id, NULL::float8 AS score, NULL::bigint AS rank WHERE FALSE)"""

# The BM25 branch scored in vectord (internal.vectord.lexical.postings), best first.
LEX_GIVEN = """
lex AS (SELECT t.id COLLATE "C" AS id, t.score, t.rank
        FROM unnest(%(lex_ids)s::text[], %(lex_scores)s::float8[])
             WITH ORDINALITY AS t(id, score, rank))"""


def candidates_sql(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
                   where: sql.Composable, filtered: bool, operator: str | None,
                   symbolic: sql.Composable | None, *, given: bool = False,
                   lexical_branch: bool = True, lexical_scored: bool = False,
                   exact: bool = False) -> sql.Composed:
    """Both branches' candidates (operator None: no vector branch; lexical_branch False:
    no BM25 branch; given: BM25 with the union's statistics passed as parameters;
    lexical_scored: the BM25 branch's ids and scores passed in, LEX_GIVEN; exact: the
    vector branch scans the filter's rows instead of the graph)."""
    vec = (sql.SQL(sql_index.VEC_NONE) if operator is None
           else sql.SQL(sql_index.VEC_EXACT if exact else sql_index.VEC).format(
               op=sql.SQL(operator), table=table, where=where))
    if not lexical_branch:
        bm25: sql.Composable = sql.SQL(LEX_NONE)
    elif lexical_scored:
        bm25 = sql.SQL(LEX_GIVEN)
    else:
        bm25 = sql_index.bm25_sql(table, corpus_id, languages, where, filtered, given=given)
    sym: sql.Composable = sql.SQL("NULL::float8")
    if symbolic is not None:
        sym = sql.SQL("(SELECT {e} FROM {t} WHERE {t}.id = coalesce(vec.id, lex.id))").format(
            e=symbolic, t=table)
    matched = sql.SQL(", (SELECT count(*) FROM vec_f) AS vec_matched" if exact and operator
                      else "")
    return sql.SQL(_CANDIDATES).format(
        vec=vec, bm25=bm25, symbolic=sym, matched=matched)


# The vector branch alone, unfiltered (hybrid's first pass on a corpus's own graph): the
# n nearest ids and distances, ranked by (distance, id) by the caller, as `vec` ranks them
# in _CANDIDATES (ids are COLLATE "C": Python's order is theirs), and the corpus's lexical
# version in the same snapshot (an InitPlan, read once), which checks a search that scored
# from the in-memory index with no statement of its own. The candidates statement with no
# BM25 branch returned six columns a row through a join and a window: reading those back
# was a sixth of vectord's CPU in a default search, the separate version read a twelfth.
_VEC_ONLY = ("SELECT id, embedding {op} %(vec_q)s AS distance, {version} FROM {table} "
             "ORDER BY distance LIMIT %(vec_n)s")


@functools.lru_cache(maxsize=4096)
def vector_only_sql(corpus_id: int, operator: str) -> bytes:
    """_VEC_ONLY for one corpus's table, rendered once (parameters vec_q, vec_n and
    lex_corpus_id)."""
    return sql.SQL(_VEC_ONLY).format(op=sql.SQL(operator), version=sql.SQL(versions.VERSION_OF),
                                     table=tables.items_table(corpus_id)).as_bytes(None)

