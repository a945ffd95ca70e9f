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

import psycopg
from psycopg import sql

# pg_advisory_xact_lock(LOCK_CLASS, corpus_id): one key space for lexical writers.
LOCK_CLASS = 0x1E8
# pg_advisory_xact_lock(FUNCTIONS_LOCK): creating the shared functions.
FUNCTIONS_LOCK = 0x1E8_0001

# The functions every corpus shares. `vectord_lex_v1` feeds generated columns, so its
# body is frozen: a change gets a new name (v2), never CREATE OR REPLACE of v1.
FUNCTIONS_SQL = r"""
CREATE OR REPLACE FUNCTION vectord_lex_v1(cfg regconfig, title text, body text, tags text[])
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
  SELECT setweight(to_tsvector(cfg, coalesce(title, '')), 'A')
      || setweight(to_tsvector(cfg, coalesce(body, '')), 'B')
      || setweight(to_tsvector(cfg, coalesce(array_to_string(tags, ' '), '')), 'C')
$f$;

CREATE OR REPLACE FUNCTION vectord_lex_lock() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM pg_advisory_xact_lock(TG_ARGV[0]::int, TG_ARGV[1]::int);
  RETURN NULL;
END
$f$;

-- TG_ARGV: [postings, stats, document frequencies]. Inserts the postings and statistics of
-- new_rows; `old_rows` (UPDATE only) removes those of rows whose lexemes changed first.
CREATE OR REPLACE FUNCTION vectord_lex_sync() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  postings text := quote_ident(TG_ARGV[0]);
  stats text := quote_ident(TG_ARGV[1]);
  dfs text := quote_ident(TG_ARGV[2]);
  gone text;
  came text;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    -- Only rows whose lexemes or language changed touch the postings.
    gone := 'SELECT o.id, o.language, o.lex FROM old_rows o WHERE NOT EXISTS ('
         || 'SELECT 1 FROM new_rows n WHERE n.id = o.id AND n.language = o.language '
         || 'AND n.lex = o.lex)';
    came := 'SELECT n.id, n.language, n.lex FROM new_rows n WHERE NOT EXISTS ('
         || 'SELECT 1 FROM old_rows o WHERE o.id = n.id AND o.language = n.language '
         || 'AND o.lex = n.lex)';
  ELSIF TG_OP = 'DELETE' THEN
    gone := 'SELECT id, language, lex FROM old_rows';
  ELSE
    came := 'SELECT id, language, lex FROM new_rows';
  END IF;

  IF gone IS NOT NULL THEN
    EXECUTE format($q$
      WITH g AS (%s),
      u AS (SELECT g.id, x.lexeme FROM g, unnest(g.lex) x),
      del AS (
        DELETE FROM %s p USING u WHERE p.lexeme = u.lexeme AND p.item_id = u.id),
      df AS (
        UPDATE %s f SET df = f.df - d.n
        FROM (SELECT lexeme, count(*) AS n FROM u GROUP BY lexeme) d
        WHERE f.lexeme = d.lexeme)
      UPDATE %s s SET n = s.n - d.n, sum_a = s.sum_a - d.a, sum_b = s.sum_b - d.b,
                      sum_c = s.sum_c - d.c
      FROM (SELECT g.language, count(*) AS n, sum(l.a) AS a, sum(l.b) AS b, sum(l.c) AS c
            FROM g, vectord_lex_lengths(g.lex) l GROUP BY g.language) d
      WHERE s.language = d.language
    $q$, gone, postings, dfs, stats);
  END IF;

  IF came IS NOT NULL THEN
    EXECUTE format($q$
      WITH c AS (%s),
      u AS (
        SELECT c.id, x.lexeme,
               cardinality(array_positions(x.weights, 'A')) AS a,
               cardinality(array_positions(x.weights, 'B')) AS b,
               cardinality(array_positions(x.weights, 'C')) AS c
        FROM c, unnest(c.lex) x),
      dl AS (
        SELECT c.id, c.language, l.a, l.b, l.c FROM c, vectord_lex_lengths(c.lex) l),
      ins AS (
        INSERT INTO %s (lexeme, item_id, tf_a, tf_b, tf_c, dl_a, dl_b, dl_c)
        SELECT u.lexeme, u.id, u.a, u.b, u.c, dl.a, dl.b, dl.c
        FROM u JOIN dl ON dl.id = u.id),
      df AS (
        INSERT INTO %s AS f (lexeme, df)
        SELECT lexeme, count(*) FROM u GROUP BY lexeme
        ON CONFLICT (lexeme) DO UPDATE SET df = f.df + excluded.df)
      INSERT INTO %s AS s (language, n, sum_a, sum_b, sum_c)
      SELECT language, count(*), sum(a), sum(b), sum(c) FROM dl GROUP BY language
      ON CONFLICT (language) DO UPDATE SET
        n = s.n + excluded.n, sum_a = s.sum_a + excluded.sum_a,
        sum_b = s.sum_b + excluded.sum_b, sum_c = s.sum_c + excluded.sum_c
    $q$, came, postings, dfs, stats);
  END IF;
  RETURN NULL;
END
$f$;

-- Top-n documents by BM25 for OR-ed lexemes, exact, without reading every posting of
-- the frequent lexemes (MaxScore, Turtle & Flood 1995). A lexeme adds at most
-- idf * (k1 + 1) to a score. The rarest lexemes R are scored in full, the others F
-- only for documents that can still reach the top n: `lb`, the n-th best full score of
-- the best 2n documents by R alone, bounds the n-th best score from below, so a document
-- whose R-score plus the bound `rest` of F is below lb cannot be in the top n. The
-- answer is exact once `rest` is below the n-th best score found. Candidates are only
-- scored on F when `rest` < 0.8 lb, or nearly every document of R would need F scored
-- one by one; otherwise a second pass takes into R all but the most frequent lexemes
-- whose bounds sum below 0.8 lb, and at worst R is every lexeme.
CREATE OR REPLACE FUNCTION vectord_bm25_top(postings text, dfs text, stats text,
    lexemes text[], k1 float8, b float8, wa float8, wb float8, wc float8, n integer,
    budget bigint)
RETURNS TABLE (id text, score float8) LANGUAGE plpgsql STABLE ROWS 10 AS $f$
DECLARE
  cnt float8;
  avgdl float8;
  t_lex text[];
  t_df float8[];
  t_idf float8[];
  total integer;
  r integer := 0;
  acc float8 := 0;
  rest float8;
  lb float8;
  nth float8;
  ids text[];
  scores float8[];
  q text;
BEGIN
  EXECUTE format('SELECT coalesce(sum(n), 0)::float8, ($1 * coalesce(sum(sum_a), 0)
      + $2 * coalesce(sum(sum_b), 0) + $3 * coalesce(sum(sum_c), 0))::float8
      / greatest(coalesce(sum(n), 0), 1)::float8 FROM %I', stats)
    INTO cnt, avgdl USING wa, wb, wc;
  EXECUTE format('SELECT array_agg(lexeme ORDER BY df, lexeme),
      array_agg(df::float8 ORDER BY df, lexeme) FROM %I WHERE lexeme = ANY($1) AND df > 0',
      dfs) INTO t_lex, t_df USING lexemes;
  IF t_lex IS NULL OR avgdl <= 0 THEN
    RETURN;
  END IF;
  total := cardinality(t_lex);
  SELECT array_agg(ln(1.0::float8 + (cnt - d + 0.5::float8) / (d + 0.5::float8)) ORDER BY o)
    INTO t_idf FROM unnest(t_df) WITH ORDINALITY AS x(d, o);
  WHILE r < total AND (r = 0 OR acc + t_df[r + 1] <= budget) LOOP
    r := r + 1;
    acc := acc + t_df[r];
  END LOOP;

  -- $1 lexemes (rarest first), $2 idf, $3 |R|, $4 rest, $5 a known lower bound of the
  -- n-th best score (or NULL), $6 n, $7 k1, $8 b, $9..$11 field weights, $12 avgdl.
  -- Returns the top n of the scored candidates, the n-th best score among them (nth)
  -- and the threshold used (lb).
  q := format($q$
    WITH t AS (SELECT * FROM unnest($1::text[], $2::float8[]) WITH ORDINALITY AS t(lexeme, idf, o)),
    part AS MATERIALIZED (
      SELECT p.item_id AS id, sum(t.idf * x.tf * ($7 + 1.0::float8)
               / (x.tf + $7 * (1.0::float8 - $8 + $8 * x.dl / $12))) AS s
      FROM t JOIN %1$I p ON p.lexeme = t.lexeme
      CROSS JOIN LATERAL (SELECT $9 * p.tf_a + $10 * p.tf_b + $11 * p.tf_c AS tf,
                                 $9 * p.dl_a + $10 * p.dl_b + $11 * p.dl_c AS dl) x
      WHERE t.o <= $3 AND x.tf > 0
      GROUP BY p.item_id),
    best AS (
      SELECT b.s + coalesce((
          SELECT sum(t.idf * x.tf * ($7 + 1.0::float8)
                     / (x.tf + $7 * (1.0::float8 - $8 + $8 * x.dl / $12)))
          FROM t JOIN %1$I p ON p.lexeme = t.lexeme AND p.item_id = b.id
          CROSS JOIN LATERAL (SELECT $9 * p.tf_a + $10 * p.tf_b + $11 * p.tf_c AS tf,
                                     $9 * p.dl_a + $10 * p.dl_b + $11 * p.dl_c AS dl) x
          WHERE t.o > $3 AND x.tf > 0), 0) AS score
      FROM (SELECT part.id, part.s FROM part ORDER BY part.s DESC, part.id LIMIT 2 * $6) b),
    th AS (
      SELECT greatest($5, (SELECT best.score FROM best ORDER BY best.score DESC
                           OFFSET $6 - 1 LIMIT 1)) AS lb),
    scored AS MATERIALIZED (
      SELECT c.id, c.s + coalesce((
          SELECT sum(t.idf * x.tf * ($7 + 1.0::float8)
                     / (x.tf + $7 * (1.0::float8 - $8 + $8 * x.dl / $12)))
          FROM t JOIN %1$I p ON p.lexeme = t.lexeme AND p.item_id = c.id
          CROSS JOIN LATERAL (SELECT $9 * p.tf_a + $10 * p.tf_b + $11 * p.tf_c AS tf,
                                     $9 * p.dl_a + $10 * p.dl_b + $11 * p.dl_c AS dl) x
          WHERE t.o > $3 AND x.tf > 0), 0) AS score
      FROM part c, th
      WHERE th.lb IS NULL OR ($4 < 0.8::float8 * th.lb AND c.s + $4 >= th.lb)),
    top AS (SELECT scored.id, scored.score FROM scored ORDER BY scored.score DESC, scored.id
            LIMIT $6)
    SELECT array_agg(top.id ORDER BY top.score DESC, top.id),
           array_agg(top.score ORDER BY top.score DESC, top.id),
           (SELECT top.score FROM top ORDER BY top.score DESC OFFSET $6 - 1 LIMIT 1),
           (SELECT th.lb FROM th)
    FROM top
  $q$, postings);

  -- R is every lexeme when r = total; then rest = 0 and part is the whole answer.
  rest := 0;
  FOR i IN r + 1 .. total LOOP
    rest := rest + t_idf[i] * (k1 + 1.0::float8);
  END LOOP;
  EXECUTE q INTO ids, scores, nth, lb
    USING t_lex, t_idf, r, rest, NULL::float8, n, k1, b, wa, wb, wc, avgdl;
  IF r < total AND NOT (nth IS NOT NULL AND rest < nth) THEN
    -- Second pass: F is the most frequent lexemes whose bound stays below a share of
    -- lb, so few documents need F scored one by one (index probes cost far more
    -- than reading a posting in order).
    lb := greatest(lb, nth);
    r := total;
    rest := 0;
    IF lb IS NOT NULL THEN
      WHILE r > 0 AND rest + t_idf[r] * (k1 + 1.0::float8) < 0.8 * lb LOOP
        rest := rest + t_idf[r] * (k1 + 1.0::float8);
        r := r - 1;
      END LOOP;
    END IF;
    EXECUTE q INTO ids, scores, nth, lb
      USING t_lex, t_idf, r, rest, lb, n, k1, b, wa, wb, wc, avgdl;
  END IF;
  RETURN QUERY SELECT * FROM unnest(ids, scores);
END
$f$;

-- Document length per weight: the number of positions (tokens) weighted A, B and C.
CREATE OR REPLACE FUNCTION vectord_lex_lengths(v tsvector, OUT a bigint, OUT b bigint,
                                               OUT c bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
  SELECT coalesce(sum(cardinality(array_positions(x.weights, 'A'))), 0),
         coalesce(sum(cardinality(array_positions(x.weights, 'B'))), 0),
         coalesce(sum(cardinality(array_positions(x.weights, 'C'))), 0)
  FROM unnest(v) x
$f$;
"""


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
    await conn.execute(FUNCTIONS_SQL)


async def install_corpus(conn: psycopg.AsyncConnection, table: sql.Identifier,
                         corpus_id: int) -> None:
    """Add the lexical column, indexes, side tables and triggers to a new items table.

    Called inside the create-corpus transaction, after the items table exists and
    before any item is written.
    """
    cid = int(corpus_id)
    postings, stats, dfs = _names(cid)
    await ensure_functions(conn)
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
    args = {
        "t": table, "p": sql.Identifier(postings), "s": sql.Identifier(stats),
        "d": sql.Identifier(dfs), "dn": sql.Literal(dfs),
        "lc": sql.Literal(str(LOCK_CLASS)), "cid": sql.Literal(str(cid)),
        "pn": sql.Literal(postings), "sn": sql.Literal(stats),
    }
    for stmt in stmts:
        await conn.execute(stmt.format(**args))


async def drop_corpus(conn: psycopg.AsyncConnection, corpus_id: int) -> None:
    """Drop the lexical side tables of a corpus; call in the delete-corpus transaction."""
    await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
        sql.SQL(", ").join(sql.Identifier(n) for n in _names(int(corpus_id)))))


# --- ranking -------------------------------------------------------------------

# Field weights of BM25F-style term frequency: tf = wA*tf_title + wB*tf_text + wC*tf_tags,
# document length likewise. 1/1/1 is plain BM25 over title + text + tags.
DEFAULT_FIELD_WEIGHTS = {"title": 1.0, "text": 1.0, "tags": 1.0}

# Query lexemes in the given languages (a regconfig[] expression), OR-ed: each distinct
# lexeme counts once, whatever its weight or position in the query.
_QUERY_LEXEMES = """
SELECT DISTINCT x.lexeme COLLATE "C"
FROM unnest({langs}) AS l(cfg), unnest(to_tsvector(l.cfg, %(lex_q)s)) AS x"""

# Okapi BM25 (Robertson/Sparck Jones idf with +1 so it is never negative, as Lucene and
# bm25s use): sum over query lexemes t in d of
#   idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),
#   idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)).
# df is the number of the lexeme's postings, counted in the same index scan.
_BM25_ALL = """
lex_st AS (
  SELECT coalesce(sum(n), 0)::float8 AS n,
         (%(lex_wa)s * coalesce(sum(sum_a), 0) + %(lex_wb)s * coalesce(sum(sum_b), 0)
          + %(lex_wc)s * coalesce(sum(sum_c), 0))::float8
         / greatest(coalesce(sum(n), 0), 1)::float8 AS avgdl
  FROM {stats}),
lex_t AS (
  SELECT f.lexeme,
         ln(1.0::float8 + (lex_st.n - f.df + 0.5::float8) / (f.df + 0.5::float8)) AS idf
  FROM {dfs} f, lex_st
  WHERE f.lexeme = ANY (ARRAY({lexemes})) AND f.df > 0),
lex_s AS (
  SELECT p.item_id AS id,
         sum(lex_t.idf * x.tf * (%(lex_k1)s + 1.0::float8)
             / (x.tf + %(lex_k1)s * (1.0::float8 - %(lex_b)s
                                     + %(lex_b)s * x.dl / lex_st.avgdl))) AS score
  FROM lex_t JOIN {postings} p ON p.lexeme = lex_t.lexeme
  CROSS JOIN lex_st
  CROSS JOIN LATERAL (
    SELECT %(lex_wa)s * p.tf_a + %(lex_wb)s * p.tf_b + %(lex_wc)s * p.tf_c AS tf,
           %(lex_wa)s * p.dl_a + %(lex_wb)s * p.dl_b + %(lex_wc)s * p.dl_c AS dl) x
  WHERE x.tf > 0
  GROUP BY p.item_id),
lex AS (
  SELECT s.id, s.score, row_number() OVER (ORDER BY s.score DESC, s.id) AS rank
  FROM (SELECT id, score FROM lex_s WHERE {lex_where}
        ORDER BY score DESC, id LIMIT %(lex_n)s) s)"""

# Unfiltered: the same scores by vectord_bm25_top, which skips the postings of frequent
# lexemes that cannot change the top n.
_BM25_TOP = """
lex AS (
  SELECT s.id, s.score, row_number() OVER (ORDER BY s.score DESC, s.id) AS rank
  FROM vectord_bm25_top({postings_name}, {dfs_name}, {stats_name}, ARRAY({lexemes}),
                        %(lex_k1)s, %(lex_b)s, %(lex_wa)s, %(lex_wb)s, %(lex_wc)s,
                        %(lex_n)s, {budget}) s)"""

# vectord_bm25_top scores the rarest lexemes in full until they hold this many postings.
TOP_BUDGET = 5000

_VEC = """
vec_c AS MATERIALIZED (
  SELECT id, embedding {op} %(vec_q)s AS distance FROM {table}
  WHERE {where} ORDER BY distance LIMIT %(vec_n)s),
vec AS (
  SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS rank FROM vec_c)"""

# The vector branch of a hybrid query that has no query vector.
_VEC_NONE = """
vec AS (SELECT NULL::text AS id, NULL::float8 AS distance, NULL::bigint AS rank WHERE FALSE)"""

ITEM_COLUMNS = ("i.id, i.title, i.text, i.tags, i.metadata, i.language::text AS language, "
                "i.updated_at")

_LEXICAL_SEARCH = """
WITH {bm25}
SELECT {columns}, lex.score AS lex_score, lex.rank AS lex_rank
FROM lex JOIN {table} i ON i.id = lex.id
ORDER BY lex.rank"""

# Reciprocal rank fusion: sum over branches of 1 / (rrf_k + rank), ranks from 1.
# A hit missing from a branch gets nothing from it, so an empty branch leaves the
# other's order as it is.
RRF = """
SELECT coalesce(vec.id, lex.id) AS id,
       coalesce(1.0::float8 / (%(rrf_k)s + vec.rank), 0)
         + coalesce(1.0::float8 / (%(rrf_k)s + lex.rank), 0)
         AS score
FROM vec FULL JOIN lex ON lex.id = vec.id"""

# Fusion method -> SQL over the branches `vec` (id, distance, rank) and `lex`
# (id, score, rank) returning (id, score), larger is better.
FUSIONS: dict[str, str] = {"rrf": RRF}

_HYBRID_SEARCH = """
WITH {vec}, {bm25},
fused AS ({fusion}),
top AS (SELECT id, score FROM fused ORDER BY score DESC, id LIMIT %(k)s)
SELECT {columns}, top.score AS fused_score, vec.distance AS vec_distance,
       vec.rank AS vec_rank, lex.score AS lex_score, lex.rank AS lex_rank
FROM top JOIN {table} i ON i.id = top.id
LEFT JOIN vec ON vec.id = top.id
LEFT JOIN lex ON lex.id = top.id
ORDER BY top.score DESC, top.id"""


def _query_lexemes(corpus_id: int, languages: list[str] | None) -> sql.Composed:
    """Lexemes of the query; languages None means every language of the corpus."""
    langs: sql.Composable
    if languages is None:
        langs = sql.SQL(
            "(SELECT array_agg(language) || 'simple'::regconfig FROM {s} WHERE n > 0)"
        ).format(s=stats_table(corpus_id))
    else:
        langs = sql.SQL("%(lex_langs)s::regconfig[]")
    return sql.SQL(_QUERY_LEXEMES).format(langs=langs)


def _bm25(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
          where: sql.Composable, filtered: bool, exhaustive: bool = False,
          budget: int = TOP_BUDGET) -> sql.Composed:
    lexemes = _query_lexemes(corpus_id, languages)
    if not filtered and not exhaustive:
        postings, stats, dfs = _names(corpus_id)
        return sql.SQL(_BM25_TOP).format(
            postings_name=sql.Literal(postings), dfs_name=sql.Literal(dfs),
            stats_name=sql.Literal(stats), lexemes=lexemes, budget=sql.Literal(int(budget)))
    # Postings exist only for existing rows, so the items table is read only to filter.
    lex_where = (sql.SQL("EXISTS (SELECT 1 FROM {t} WHERE {t}.id = lex_s.id AND {w})").format(
        t=table, w=where) if filtered else sql.SQL("TRUE"))
    return sql.SQL(_BM25_ALL).format(
        stats=stats_table(corpus_id), postings=postings_table(corpus_id),
        dfs=dfs_table(corpus_id), lexemes=lexemes, lex_where=lex_where)


def lexical_sql(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
                where: sql.Composable, filtered: bool, exhaustive: bool = False,
                budget: int = TOP_BUDGET) -> sql.Composed:
    """Top-`lex_n` items by BM25: columns of the item plus lex_score, lex_rank.

    exhaustive: score every posting instead of vectord_bm25_top (same answer; tests).
    """
    return sql.SQL(_LEXICAL_SEARCH).format(
        bm25=_bm25(table, corpus_id, languages, where, filtered, exhaustive, budget),
        columns=sql.SQL(ITEM_COLUMNS), table=table)


def hybrid_sql(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
               where: sql.Composable, filtered: bool, operator: str | None,
               fusion: str = "rrf") -> sql.Composed:
    """Both branches and their fusion in one statement: top `k` by fused score.

    operator None: no query vector, the vector branch is empty.
    """
    vec = (sql.SQL(_VEC_NONE) if operator is None
           else sql.SQL(_VEC).format(op=sql.SQL(operator), table=table, where=where))
    return sql.SQL(_HYBRID_SEARCH).format(
        vec=vec,
        bm25=_bm25(table, corpus_id, languages, where, filtered),
        fusion=sql.SQL(FUSIONS[fusion]), columns=sql.SQL(ITEM_COLUMNS), table=table)


def bm25_params(query_text: str, languages: list[str] | None, k1: float, b: float,
                weights: dict[str, float], n: int) -> dict[str, object]:
    """The parameters the BM25 branch's SQL names (all prefixed lex_)."""
    params: dict[str, object] = {
        "lex_q": query_text, "lex_k1": float(k1), "lex_b": float(b),
        "lex_wa": float(weights["title"]), "lex_wb": float(weights["text"]),
        "lex_wc": float(weights["tags"]), "lex_n": int(n)}
    if languages is not None:
        params["lex_langs"] = languages
    return params
