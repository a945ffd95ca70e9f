"""Lexical (BM25) search inside PostgreSQL: per-corpus tsvector, postings, statistics.

Each corpus's items table gets a generated, weighted tsvector `lex` (A title, B text,
C tags, each stemmed with the row's own regconfig), and three side tables kept exact by
statement-level triggers with transition tables:

- `vectord_items_<id>_postings` (lexeme, item_id, tf per weight, document length per
  weight): one row per distinct lexeme of a document. This is the inverted index that
  finds candidates: BM25 needs the term frequency of a query lexeme in each matching
  document, which a GIN index over `lex` cannot give (it stores document ids only), so
  the primary key (lexeme, item_id) INCLUDE (...) answers both with an index-only range
  scan. A GIN index would be a second copy of the same lexeme -> documents map, paid on
  every write and never read, so there is none.
- `vectord_items_<id>_lexdf` (lexeme, df): documents per lexeme.
- `vectord_items_<id>_lexstats` (language, n, sum_a, sum_b, sum_c): documents and total
  length per weight, by language; N and avgdl are their sums.

Because the statistics live in PostgreSQL every vectord replica ranks alike. Writers of
one corpus serialize on a transaction advisory lock taken in a BEFORE STATEMENT trigger,
before any item row is locked, so concurrent upserts queue instead of deadlocking on the
statistics rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from internal.vectord import sqlfiles

# pg_advisory_xact_lock(LOCK_CLASS, corpus_id): one key space for lexical writers.
LOCK_CLASS = 0x1E8
# pg_advisory_xact_lock(FUNCTIONS_LOCK): creating the shared functions.
FUNCTIONS_LOCK = 0x1E8_0001

# The functions every corpus shares. `vectord_lex_v1` feeds generated columns, so its
# body is frozen: a change gets a new name (v2), never CREATE OR REPLACE of v1.
FUNCTIONS_SQL = sqlfiles.read("lexical/functions.sql")


def postings_table(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_items_{int(corpus_id)}_postings")


def stats_table(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_items_{int(corpus_id)}_lexstats")


def dfs_table(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_items_{int(corpus_id)}_lexdf")


def _names(corpus_id: int) -> tuple[str, str, str]:
    cid = int(corpus_id)
    return (f"vectord_items_{cid}_postings", f"vectord_items_{cid}_lexstats",
            f"vectord_items_{cid}_lexdf")


async def ensure_functions(conn: psycopg.AsyncConnection) -> None:
    """Create (or refresh) the shared SQL functions; serialized across replicas."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (FUNCTIONS_LOCK,))
    await conn.execute(FUNCTIONS_SQL.replace("{listed}", str(CHANGES_LISTED)))


async def install_corpus(conn: psycopg.AsyncConnection, table: sql.Identifier,
                         corpus_id: int) -> None:
    """Add the lexical column, indexes, side tables and triggers to a new items table.

    Called inside the create-corpus transaction, after the items table exists and
    before any item is written.
    """
    cid = int(corpus_id)
    postings, stats, dfs = _names(cid)
    stmts = [
        sql.SQL("ALTER TABLE {t} ADD COLUMN lex tsvector GENERATED ALWAYS AS "
                "(vectord_lex_v1(language, title, text, tags)) STORED"),
        # COLLATE "C": byte order, so lexemes compare the same on every server.
        sql.SQL("""CREATE TABLE {p} (
            lexeme  text COLLATE "C" NOT NULL,
            item_id text COLLATE "C" NOT NULL,
            tf_a smallint NOT NULL, tf_b smallint NOT NULL, tf_c smallint NOT NULL,
            dl_a integer NOT NULL, dl_b integer NOT NULL, dl_c integer NOT NULL,
            PRIMARY KEY (lexeme, item_id) INCLUDE (tf_a, tf_b, tf_c, dl_a, dl_b, dl_c))"""),
        sql.SQL("""CREATE TABLE {s} (
            language regconfig PRIMARY KEY,
            n bigint NOT NULL, sum_a bigint NOT NULL, sum_b bigint NOT NULL,
            sum_c bigint NOT NULL)"""),
        # Documents per lexeme; rows may reach 0 and stay.
        sql.SQL("""CREATE TABLE {d} (lexeme text COLLATE "C" PRIMARY KEY,
                                     df bigint NOT NULL)"""),
    ]
    args = {"t": table, "p": sql.Identifier(postings), "s": sql.Identifier(stats),
            "d": sql.Identifier(dfs)}
    for stmt in stmts:
        await conn.execute(stmt.format(**args))
    await install_triggers(conn, table, cid)


async def install_triggers(conn: psycopg.AsyncConnection, table: sql.Identifier,
                           corpus_id: int) -> None:
    """The triggers that keep the corpus's side tables exact, on its items table (a new
    corpus's, or the table a conversion gives the corpus at its switch)."""
    cid = int(corpus_id)
    postings, stats, dfs = _names(cid)
    stmts = [
        sql.SQL("CREATE TRIGGER vectord_lex_lock BEFORE INSERT OR UPDATE OR DELETE ON {t} "
                "FOR EACH STATEMENT EXECUTE FUNCTION vectord_lex_lock({lc}, {cid})"),
        sql.SQL("CREATE TRIGGER vectord_lex_ins AFTER INSERT ON {t} "
                "REFERENCING NEW TABLE AS new_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION vectord_lex_sync({pn}, {sn}, {dn})"),
        sql.SQL("CREATE TRIGGER vectord_lex_upd AFTER UPDATE ON {t} "
                "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION vectord_lex_sync({pn}, {sn}, {dn})"),
        sql.SQL("CREATE TRIGGER vectord_lex_del AFTER DELETE ON {t} "
                "REFERENCING OLD TABLE AS old_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION vectord_lex_sync({pn}, {sn}, {dn})"),
    ]
    args = {"t": table, "dn": sql.Literal(dfs), "lc": sql.Literal(str(LOCK_CLASS)),
            "cid": sql.Literal(str(cid)), "pn": sql.Literal(postings), "sn": sql.Literal(stats)}
    for stmt in stmts:
        await conn.execute(stmt.format(**args))


async def drop_corpus(conn: psycopg.AsyncConnection, corpus_id: int) -> None:
    """Drop the lexical side tables of a corpus; call in the delete-corpus transaction."""
    await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
        sql.SQL(", ").join(sql.Identifier(n) for n in _names(int(corpus_id)))))
    await conn.execute(DROP_VERSIONS, {"id": int(corpus_id)})


DROP_VERSIONS = """
WITH c AS (DELETE FROM vectord_lex_changes WHERE corpus_id = %(id)s)
DELETE FROM vectord_lex_versions WHERE corpus_id = %(id)s"""

# Versions of the change log a reader can catch up over; the trigger keeps this many.
CHANGES_KEPT = 256
# A write touching more lexemes than this logs an empty list: "forget every lexeme".
CHANGES_LISTED = 4096


# --- ranking -------------------------------------------------------------------

# Field weights of BM25F-style term frequency: tf = wA*tf_title + wB*tf_text + wC*tf_tags,
# document length likewise. 1/1/1 is plain BM25 over title + text + tags.
DEFAULT_FIELD_WEIGHTS = {"title": 1.0, "text": 1.0, "tags": 1.0}


@dataclass(frozen=True)
class QueryStats:
    """The query side of BM25 over the corpora searched together (vectord_bm25_query).

    Computed once per request and handed to every corpus, so all of them score with the
    statistics of their union and their BM25 values share one scale.
    """

    lexemes: list[str]  # rarest first
    weights: list[float]  # idf * qtf
    dfs: list[float]
    avgdl: float
    n: float


# The statistics of this corpus alone, computed inside the search statement (one round trip).
_STATS_INLINE = """
lex_q AS (
  SELECT lexemes, w, df, avgdl FROM vectord_bm25_query(
    {stats}::text[], {dfs}::text[], {langs}, {auto}::text[], %(lex_q)s,
    %(lex_wa)s, %(lex_wb)s, %(lex_wc)s))"""

# The statistics of the union, computed beforehand (QueryStats) and passed in; `small`:
# the query's postings fit TOP_BUDGET (computed by bm25_params from the given df).
_STATS_GIVEN = """
lex_q AS (
  SELECT %(lex_lexemes)s::text[] AS lexemes, %(lex_w)s::float8[] AS w,
         %(lex_df)s::float8[] AS df, %(lex_avgdl)s::float8 AS avgdl,
         %(lex_small)s::boolean AS small)"""

# The statistics of one corpus as plain SQL over its side tables: what vectord_bm25_query
# computes for a single corpus, term for term (the same float8 arithmetic, so the same
# weights to the last bit), without plpgsql or dynamic EXECUTE, so the whole statement is
# one prepared plan (planning top2's and the statistics' dynamic statements on
# every call was a third of a SciFact query's time). `small`: the query's postings fit
# {budget}, so every posting is scored in the statement itself and vectord_bm25_top2 is
# not called (its plan is never cached: it is dynamic SQL).
_STATS_STATIC = """
lex_qt AS (
  SELECT t.lexeme COLLATE "C" AS lexeme, t.qtf
  FROM vectord_query_terms({langs}, {ql}, %(lex_q)s) t),
lex_st AS MATERIALIZED (
  SELECT coalesce(sum(n), 0)::float8 AS n,
         (%(lex_wa)s * coalesce(sum(sum_a), 0)::float8
          + %(lex_wb)s * coalesce(sum(sum_b), 0)::float8
          + %(lex_wc)s * coalesce(sum(sum_c), 0)::float8)
         / greatest(coalesce(sum(n), 0)::float8, 1::float8) AS avgdl
  FROM {stats}),
lex_tw AS MATERIALIZED (
  SELECT q.lexeme, f.df::float8 AS df,
         ln(1.0::float8 + (st.n - f.df + 0.5::float8) / (f.df + 0.5::float8)) * q.qtf AS w
  FROM lex_qt q JOIN {dfs} f ON f.lexeme = q.lexeme CROSS JOIN lex_st st WHERE f.df > 0),
lex_q AS MATERIALIZED (
  SELECT array_agg(t.lexeme ORDER BY t.df, t.lexeme) AS lexemes,
         array_agg(t.w ORDER BY t.df, t.lexeme) AS w,
         array_agg(t.df ORDER BY t.df, t.lexeme) AS df,
         (SELECT lex_st.avgdl FROM lex_st) AS avgdl,
         coalesce(sum(t.df), 0) <= {budget} AS small
  FROM lex_tw t)"""

# The union's statistics, once per multi-corpus search ({held}: held_languages of the
# `auto` corpora, so their queries are stemmed only in the languages they hold).
UNION_STATS = """
SELECT lexemes, w, df, avgdl, cnt FROM vectord_bm25_query(
  %(stats)s::text[], %(dfs)s::text[], %(langs)s::regconfig[] || {held}, '{{}}'::text[], %(q)s,
  %(wa)s, %(wb)s, %(wc)s)"""

# Okapi BM25 (Robertson/Sparck Jones idf with +1 so it is never negative, as Lucene and
# bm25s use): sum over query lexemes t in d of
#   qtf(t) * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),
#   idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),
# with N, df and avgdl from lex_q. Every posting of every query lexeme is read. Scores
# are rounded to 1e-12, as vectord_bm25_top2 rounds them (equal documents tie exactly).
_SCORE_POSTINGS = """
lex_t AS (
  SELECT t.lexeme, t.w FROM lex_q, unnest(lex_q.lexemes, lex_q.w) AS t(lexeme, w){gate}),
lex_s AS (
  SELECT p.item_id AS id,
         round(sum(lex_t.w * x.tf * (%(lex_k1)s + 1.0::float8)
                   / (x.tf + %(lex_k1)s * (1.0::float8 - %(lex_b)s
                                           + %(lex_b)s * x.dl / lex_q.avgdl)))
               * 1e12::float8) / 1e12::float8 AS score
  FROM lex_t JOIN {postings} p ON p.lexeme = lex_t.lexeme
  CROSS JOIN lex_q
  CROSS JOIN LATERAL (
    SELECT %(lex_wa)s * p.tf_a + %(lex_wb)s * p.tf_b + %(lex_wc)s * p.tf_c AS tf,
           %(lex_wa)s * p.dl_a + %(lex_wb)s * p.dl_b + %(lex_wc)s * p.dl_c AS dl) x
  WHERE x.tf > 0 {only_ids}
  GROUP BY p.item_id)"""

_BM25_ALL = """
{stats_cte},
{scored},
lex AS (
  SELECT s.id, s.score, row_number() OVER (ORDER BY s.score DESC, s.id) AS rank
  FROM (SELECT id, score FROM lex_s WHERE {lex_where}
        ORDER BY score DESC, id LIMIT %(lex_n)s) s)"""

# Unfiltered: the same scores. When the query's postings fit the budget (lex_q.small)
# every posting is scored right here (the exhaustive sum, what vectord_bm25_top2 would do
# then, minus planning its dynamic statement); otherwise vectord_bm25_top2 skips the
# postings of frequent lexemes that cannot change the top n. One branch runs: the other's
# filter is false before it reads a row.
_BM25_TOP = """
{stats_cte},
{scored},
lex_pruned AS (
  SELECT s.id, s.score
  FROM lex_q, vectord_bm25_top2({postings_name}, lex_q.lexemes, lex_q.df, lex_q.w,
                                lex_q.avgdl, %(lex_k1)s, %(lex_b)s, %(lex_wa)s, %(lex_wb)s,
                                %(lex_wc)s, %(lex_n)s, {budget}) s
  WHERE NOT lex_q.small),
lex AS (
  SELECT u.id, u.score, row_number() OVER (ORDER BY u.score DESC, u.id) AS rank
  FROM (SELECT * FROM (SELECT id, score FROM lex_s ORDER BY score DESC, id
                       LIMIT %(lex_n)s) e
        UNION ALL SELECT id, score FROM lex_pruned) u)"""

# vectord_bm25_top2 scores the rarest lexemes in full until they hold this many postings.
TOP_BUDGET = 5000

VEC = """
vec_c AS MATERIALIZED (
  SELECT id, embedding {op} %(vec_q)s AS distance FROM {table}
  WHERE {where} ORDER BY distance LIMIT %(vec_n)s),
vec AS (
  SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS rank FROM vec_c)"""

# The vector branch as an exact scan of a selective filter's rows, at most vec_cap of them
# (NULL: all), counted in the statement's `vec_matched` (storage/searches.py's exact_cap
# decides; docs/decisions/0301-selective-filters-scan-exactly.md). The CTE fences the HNSW
# graph off.
VEC_EXACT = """
vec_f AS MATERIALIZED (
  SELECT id, embedding {op} %(vec_q)s AS distance FROM {table} WHERE {where}
  LIMIT %(vec_cap)s),
vec_c AS MATERIALIZED (SELECT id, distance FROM vec_f ORDER BY distance, id LIMIT %(vec_n)s),
vec AS (
  SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS rank FROM vec_c)"""

# The vector branch of a hybrid query that has no query vector.
VEC_NONE = """
vec AS (SELECT NULL::text AS id, NULL::float8 AS distance, NULL::bigint AS rank WHERE FALSE)"""

ITEM_COLUMNS = ("i.id, i.title, i.text, i.tags, i.metadata, i.language::text AS language, "
                "i.updated_at")

_LEXICAL_SEARCH = """
WITH {bm25}
SELECT {columns}, lex.score AS lex_score, lex.rank AS lex_rank
FROM lex JOIN {table} i ON i.id = lex.id
ORDER BY lex.rank"""


def stats_sources(corpus_ids: list[int]) -> dict[str, list[str]]:
    """Table names vectord_bm25_query reads for these corpora."""
    names = [_names(cid) for cid in corpus_ids]
    return {"stats": [n[1] for n in names], "dfs": [n[2] for n in names]}


# The question's language (language.question_language): the language most items of the
# corpora are in, ties to the first name in code-point order; NULL when they hold none.
QUESTION_LANGUAGE = """(SELECT s.language FROM ({parts}) s WHERE s.n > 0 GROUP BY s.language
 ORDER BY sum(s.n) DESC, s.language::text COLLATE "C" LIMIT 1)"""


def question_language(corpus_ids: list[int]) -> sql.Composable:
    """SQL: the question's language over these corpora's statistics (regconfig)."""
    if not corpus_ids:
        return sql.SQL("NULL::regconfig")
    parts = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT language, n FROM {}").format(stats_table(cid)) for cid in corpus_ids)
    return sql.SQL(QUESTION_LANGUAGE).format(parts=parts)


def held_languages(corpus_ids: list[int]) -> sql.Composable:
    """SQL: the languages these corpora hold items in (regconfig[]), read from their stats.

    The query of an `auto` corpus is stemmed in these only: stemming it in `simple` too
    when no item is `simple` added unstemmed forms (and stop words) that can only match
    other words' stems ("environment" matching "environmental" in English documents).
    """
    if not corpus_ids:
        return sql.SQL("'{}'::regconfig[]")
    parts = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT language FROM {} WHERE n > 0").format(stats_table(cid))
        for cid in corpus_ids)
    return sql.SQL("(SELECT coalesce(array_agg(DISTINCT s.language::regconfig), "
                   "'{{}}'::regconfig[]) FROM ({}) s)").format(parts)


def _stats_cte(corpus_id: int, languages: list[str] | None, given: bool,
               static: bool = False, budget: int = TOP_BUDGET) -> sql.Composed:
    """lex_q: this corpus's own statistics (inline), or the union's (given as params).

    static: the inline statistics as plain SQL (_STATS_STATIC, with `small`) instead of
    vectord_bm25_query.
    """
    if given:
        return sql.SQL(_STATS_GIVEN).format()
    _, stats, dfs = _names(corpus_id)
    # An `auto` corpus: the query is stemmed in the languages the corpus holds (held_languages),
    # passed as fixed languages so that vectord_bm25_query does not add `simple`.
    langs: sql.Composable = (held_languages([corpus_id]) if languages is None
                             else sql.SQL("%(lex_langs)s::regconfig[]"))
    if static:
        return sql.SQL(_STATS_STATIC).format(
            langs=langs, ql=question_language([corpus_id]), stats=stats_table(corpus_id),
            dfs=dfs_table(corpus_id), budget=sql.Literal(int(budget)))
    auto = sql.SQL("'{}'")
    return sql.SQL(_STATS_INLINE).format(
        stats=sql.SQL("ARRAY[{}]").format(sql.Literal(stats)),
        dfs=sql.SQL("ARRAY[{}]").format(sql.Literal(dfs)), langs=langs, auto=auto)


def _scored(corpus_id: int, *, gate: bool = False, only_ids: bool = False) -> sql.Composed:
    """lex_t and lex_s: every posting of the query's lexemes scored (_SCORE_POSTINGS);
    gate: only when lex_q.small; only_ids: just the items in %(lex_ids)s."""
    return sql.SQL(_SCORE_POSTINGS).format(
        gate=sql.SQL("\n  WHERE lex_q.small") if gate else sql.SQL(""),
        postings=postings_table(corpus_id),
        only_ids=(sql.SQL("AND p.item_id = ANY(%(lex_ids)s::text[])") if only_ids
                  else sql.SQL("")))


def bm25_sql(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
          where: sql.Composable, filtered: bool, exhaustive: bool = False,
          budget: int = TOP_BUDGET, given: bool = False, only_ids: bool = False
          ) -> sql.Composed:
    """The CTEs lex_q and lex (id, score, rank): the corpus's top lex_n by BM25.

    languages None: every language the corpus holds (an `auto` corpus). given: the
    statistics come as parameters (QueryStats of the corpora searched together).
    only_ids: score just the items in %(lex_ids)s (exhaustively).
    """
    if not filtered and not exhaustive and not only_ids:
        postings, _, _ = _names(corpus_id)
        return sql.SQL(_BM25_TOP).format(
            stats_cte=_stats_cte(corpus_id, languages, given, static=True, budget=budget),
            scored=_scored(corpus_id, gate=True), postings_name=sql.Literal(postings),
            budget=sql.Literal(int(budget)))
    stats_cte = _stats_cte(corpus_id, languages, given)
    # Postings exist only for existing rows, so the items table is read only to filter.
    lex_where = (sql.SQL("EXISTS (SELECT 1 FROM {t} WHERE {t}.id = lex_s.id AND {w})").format(
        t=table, w=where) if filtered else sql.SQL("TRUE"))
    return sql.SQL(_BM25_ALL).format(
        stats_cte=stats_cte, scored=_scored(corpus_id, only_ids=only_ids), lex_where=lex_where)


def lexical_sql(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
                where: sql.Composable, filtered: bool, exhaustive: bool = False,
                budget: int = TOP_BUDGET, given: bool = False) -> sql.Composed:
    """Top-`lex_n` items by BM25: columns of the item plus lex_score, lex_rank.

    exhaustive: score every posting instead of vectord_bm25_top2 (same answer; tests).
    """
    return sql.SQL(_LEXICAL_SEARCH).format(
        bm25=bm25_sql(table, corpus_id, languages, where, filtered, exhaustive, budget, given),
        columns=sql.SQL(ITEM_COLUMNS), table=table)


def bm25_params(query_text: str, languages: list[str] | None, k1: float, b: float,
                weights: dict[str, float], n: int,
                stats: QueryStats | None = None) -> dict[str, object]:
    """The parameters the BM25 branch's SQL names (all prefixed lex_)."""
    params: dict[str, object] = {
        "lex_q": query_text, "lex_k1": float(k1), "lex_b": float(b),
        "lex_wa": float(weights["title"]), "lex_wb": float(weights["text"]),
        "lex_wc": float(weights["tags"]), "lex_n": int(n)}
    if languages is not None:
        params["lex_langs"] = languages
    if stats is not None:
        params.update({"lex_lexemes": stats.lexemes, "lex_w": stats.weights,
                       "lex_df": stats.dfs, "lex_avgdl": stats.avgdl,
                       "lex_small": sum(stats.dfs) <= TOP_BUDGET})
    return params
