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
  touched text[] := '{}';
  more text[];
  docs bigint;
  changed boolean := false;
  every boolean := false;  -- too many lexemes to list: the log says "all of them"
  cid bigint;
  ver bigint;
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
        WHERE f.lexeme = d.lexeme RETURNING f.lexeme),
      st AS (
        UPDATE %s s SET n = s.n - d.n, sum_a = s.sum_a - d.a, sum_b = s.sum_b - d.b,
                        sum_c = s.sum_c - d.c
        FROM (SELECT g.language, count(*) AS n, sum(l.a) AS a, sum(l.b) AS b, sum(l.c) AS c
              FROM g, vectord_lex_lengths(g.lex) l GROUP BY g.language) d
        WHERE s.language = d.language RETURNING s.n)
      SELECT (SELECT count(*) FROM st),
             (SELECT CASE WHEN count(*) <= %s THEN coalesce(array_agg(lexeme), '{}') END
              FROM df)
    $q$, gone, postings, dfs, stats, {listed}) INTO docs, more;  -- CHANGES_LISTED
    IF docs > 0 THEN
      changed := true;
      IF more IS NULL THEN every := true; ELSE touched := touched || more; END IF;
    END IF;
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
        ON CONFLICT (lexeme) DO UPDATE SET df = f.df + excluded.df RETURNING f.lexeme),
      st AS (
        INSERT INTO %s AS s (language, n, sum_a, sum_b, sum_c)
        SELECT language, count(*), sum(a), sum(b), sum(c) FROM dl GROUP BY language
        ON CONFLICT (language) DO UPDATE SET
          n = s.n + excluded.n, sum_a = s.sum_a + excluded.sum_a,
          sum_b = s.sum_b + excluded.sum_b, sum_c = s.sum_c + excluded.sum_c
        RETURNING s.n)
      SELECT (SELECT count(*) FROM st),
             (SELECT CASE WHEN count(*) <= %s THEN coalesce(array_agg(lexeme), '{}') END
              FROM df)
    $q$, came, postings, dfs, stats, {listed}) INTO docs, more;  -- CHANGES_LISTED
    IF docs > 0 THEN
      changed := true;
      IF more IS NULL THEN every := true; ELSE touched := touched || more; END IF;
    END IF;
  END IF;

  -- A row whose lexemes did not change but whose metadata or updated_at did (an upsert
  -- of new metadata or a new vector) moves the version too, logging the lexeme '' (none
  -- exists: a cache forgets nothing): vectord's kept hit rows are valid only at the
  -- version they were read at (lexindex.Rows). Re-embedding's fills touch neither.
  IF TG_OP = 'UPDATE' AND NOT changed THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id '
         || 'WHERE n.metadata IS DISTINCT FROM o.metadata '
         || 'OR n.updated_at IS DISTINCT FROM o.updated_at)' INTO changed;
    IF changed THEN
      touched := ARRAY[''];
    END IF;
  END IF;

  -- The corpus's version, bumped in this transaction; writers of a corpus hold its
  -- advisory lock (vectord_lex_lock) until commit, so versions are gapless in commit
  -- order. The change log says which lexemes each version touched: a vectord's cached
  -- index (postings.py) forgets exactly those (lexindex.py). A write that changed only
  -- the statistics (an item with no lexeme) bumps the version too. Over CHANGES_LISTED
  -- lexemes (a bulk load's batch) the log holds an empty list, read as "every lexeme":
  -- listing them cost more than the cache saves by forgetting fewer.
  IF changed THEN
    cid := substring(TG_TABLE_NAME FROM '^vectord_items_([0-9]+)$')::bigint;
    INSERT INTO vectord_lex_versions AS v (corpus_id, version) VALUES (cid, 1)
      ON CONFLICT (corpus_id) DO UPDATE SET version = v.version + 1
      RETURNING version INTO ver;
    IF NOT every THEN
      touched := ARRAY(SELECT DISTINCT x FROM unnest(touched) x);
    END IF;
    IF every OR cardinality(touched) > {listed} OR cardinality(touched) = 0 THEN
      touched := '{}';
    END IF;
    INSERT INTO vectord_lex_changes (corpus_id, version, lexemes) VALUES (cid, ver, touched);
    DELETE FROM vectord_lex_changes WHERE corpus_id = cid AND version <= ver - 256;  -- CHANGES_KEPT
  END IF;
  RETURN NULL;
END
$f$;

-- The query side of BM25 over a set of corpora (one, or several searched together):
-- the query's lexemes in the given languages, each with its weight idf * qtf (qtf: how
-- often the lexeme occurs in the query, as Robertson's BM25, Lucene and bm25s count it),
-- its document frequency summed over the corpora, and the union's N and average length.
-- Languages: `langs`, plus, for each `auto` corpus (its stats table in `auto_stats`),
-- every language it holds and `simple`. Lexemes with df 0 are left out; the arrays are
-- ordered rarest first, as vectord_bm25_top2 needs them.
CREATE OR REPLACE FUNCTION vectord_bm25_query(stats text[], dfs text[], langs regconfig[],
    auto_stats text[], q text, wa float8, wb float8, wc float8,
    OUT lexemes text[], OUT w float8[], OUT df float8[], OUT avgdl float8, OUT cnt float8)
LANGUAGE plpgsql STABLE AS $f$
DECLARE
  t text;
  more regconfig[];
  all_langs regconfig[] := coalesce(langs, '{}');
  q_lex text[];
  q_tf float8[];
  d float8[];
  part float8[];
  nn float8 := 0;
  sa float8 := 0;
  sb float8 := 0;
  sc float8 := 0;
  st record;
BEGIN
  IF cardinality(auto_stats) > 0 THEN
    FOREACH t IN ARRAY auto_stats LOOP
      EXECUTE format('SELECT coalesce(array_agg(language), ''{}'') FROM %I WHERE n > 0', t)
        INTO more;
      all_langs := all_langs || more;
    END LOOP;
    all_langs := all_langs || 'simple'::regconfig;
  END IF;
  SELECT array_agg(s.lexeme ORDER BY s.lexeme), array_agg(s.qtf ORDER BY s.lexeme)
    INTO q_lex, q_tf
    FROM (SELECT x.lexeme COLLATE "C" AS lexeme, max(cardinality(x.positions))::float8 AS qtf
          FROM (SELECT DISTINCT c FROM unnest(all_langs) AS c) l,
               unnest(to_tsvector(l.c, q)) x
          GROUP BY 1) s;
  FOREACH t IN ARRAY stats LOOP
    EXECUTE format('SELECT coalesce(sum(n), 0)::float8 AS n, coalesce(sum(sum_a), 0)::float8 AS a,
        coalesce(sum(sum_b), 0)::float8 AS b, coalesce(sum(sum_c), 0)::float8 AS c FROM %I', t)
      INTO st;
    nn := nn + st.n;
    sa := sa + st.a;
    sb := sb + st.b;
    sc := sc + st.c;
  END LOOP;
  cnt := nn;
  avgdl := (wa * sa + wb * sb + wc * sc) / greatest(nn, 1::float8);
  IF q_lex IS NULL THEN
    RETURN;
  END IF;
  d := array_fill(0::float8, ARRAY[cardinality(q_lex)]);
  FOREACH t IN ARRAY dfs LOOP
    EXECUTE format('SELECT array_agg(coalesce(f.df, 0)::float8 ORDER BY u.o)
        FROM unnest($1::text[]) WITH ORDINALITY AS u(lexeme, o)
        LEFT JOIN %I f ON f.lexeme = u.lexeme', t) INTO part USING q_lex;
    SELECT array_agg(u.a + u.b ORDER BY u.o) INTO d
      FROM unnest(d, part) WITH ORDINALITY AS u(a, b, o);
  END LOOP;
  SELECT array_agg(u.lexeme ORDER BY u.df, u.lexeme),
         array_agg(ln(1.0::float8 + (nn - u.df + 0.5::float8) / (u.df + 0.5::float8)) * u.qtf
                   ORDER BY u.df, u.lexeme),
         array_agg(u.df ORDER BY u.df, u.lexeme)
    INTO lexemes, w, df
    FROM unnest(q_lex, q_tf, d) AS u(lexeme, qtf, df) WHERE u.df > 0;
END
$f$;

-- Top-n documents of one corpus by BM25 for OR-ed lexemes, exact, without reading every
-- posting of the frequent lexemes (MaxScore, Turtle & Flood 1995). The statistics come in
-- from vectord_bm25_query (of this corpus, or of the union of the corpora searched
-- together): t_lex rarest first, t_w = idf * qtf, t_df. A lexeme adds at most
-- w * (k1 + 1) to a score. The rarest lexemes R are scored in full, the others F
-- only for documents that can still reach the top n: `lb`, the n-th best full score of
-- the best 2n documents by R alone, bounds the n-th best score from below, so a document
-- whose R-score plus the bound `rest` of F is below lb cannot be in the top n. The
-- answer is exact once `rest` is below the n-th best score found. Candidates are only
-- scored on F when `rest` < 0.8 lb, or nearly every document of R would need F scored
-- one by one; otherwise a second pass takes into R all but the most frequent lexemes
-- whose bounds sum below 0.8 lb, and at worst R is every lexeme.
-- Final scores are rounded to 1e-12: a float sum depends on the order of its terms (the
-- order postings are read in), and two documents of equal content must tie exactly, in
-- any corpus, so that the tie goes by id everywhere.
CREATE OR REPLACE FUNCTION vectord_bm25_top2(postings text, t_lex text[], t_df float8[],
    t_w float8[], avgdl float8, k1 float8, b float8, wa float8, wb float8, wc float8,
    n integer, budget bigint)
RETURNS TABLE (id text, score float8) LANGUAGE plpgsql STABLE ROWS 10 AS $f$
DECLARE
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
  IF t_lex IS NULL OR avgdl IS NULL OR avgdl <= 0 THEN
    RETURN;
  END IF;
  total := cardinality(t_lex);
  WHILE r < total AND (r = 0 OR acc + t_df[r + 1] <= budget) LOOP
    r := r + 1;
    acc := acc + t_df[r];
  END LOOP;

  -- $1 lexemes (rarest first), $2 weights idf * qtf, $3 |R|, $4 rest, $5 a known lower
  -- bound of the n-th best score (or NULL), $6 n, $7 k1, $8 b, $9..$11 field weights,
  -- $12 avgdl. Returns the top n of the scored candidates, the n-th best score among them
  -- (nth) and the threshold used (lb).
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
      SELECT round((b.s + coalesce((
          SELECT sum(t.idf * x.tf * ($7 + 1.0::float8)
                     / (x.tf + $7 * (1.0::float8 - $8 + $8 * x.dl / $12)))
          FROM t JOIN %1$I p ON p.lexeme = t.lexeme AND p.item_id = b.id
          CROSS JOIN LATERAL (SELECT $9 * p.tf_a + $10 * p.tf_b + $11 * p.tf_c AS tf,
                                     $9 * p.dl_a + $10 * p.dl_b + $11 * p.dl_c AS dl) x
          WHERE t.o > $3 AND x.tf > 0), 0)) * 1e12::float8) / 1e12::float8 AS score
      FROM (SELECT part.id, part.s FROM part ORDER BY part.s DESC, part.id LIMIT 2 * $6) b),
    th AS (
      SELECT greatest($5, (SELECT best.score FROM best ORDER BY best.score DESC
                           OFFSET $6 - 1 LIMIT 1)) AS lb),
    scored AS MATERIALIZED (
      SELECT c.id, round((c.s + coalesce((
          SELECT sum(t.idf * x.tf * ($7 + 1.0::float8)
                     / (x.tf + $7 * (1.0::float8 - $8 + $8 * x.dl / $12)))
          FROM t JOIN %1$I p ON p.lexeme = t.lexeme AND p.item_id = c.id
          CROSS JOIN LATERAL (SELECT $9 * p.tf_a + $10 * p.tf_b + $11 * p.tf_c AS tf,
                                     $9 * p.dl_a + $10 * p.dl_b + $11 * p.dl_c AS dl) x
          WHERE t.o > $3 AND x.tf > 0), 0)) * 1e12::float8) / 1e12::float8 AS score
      FROM part c, th
      WHERE th.lb IS NULL OR ($4 < 0.8::float8 * th.lb AND c.s + $4 >= th.lb - 1e-9::float8)),
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
    rest := rest + t_w[i] * (k1 + 1.0::float8);
  END LOOP;
  EXECUTE q INTO ids, scores, nth, lb
    USING t_lex, t_w, r, rest, NULL::float8, n, k1, b, wa, wb, wc, avgdl;
  IF r < total AND NOT (nth IS NOT NULL AND rest < nth) THEN
    -- Second pass: F is the most frequent lexemes whose bound stays below a share of
    -- lb, so few documents need F scored one by one (index probes cost far more
    -- than reading a posting in order).
    lb := greatest(lb, nth);
    r := total;
    rest := 0;
    IF lb IS NOT NULL THEN
      WHILE r > 0 AND rest + t_w[r] * (k1 + 1.0::float8) < 0.8 * lb LOOP
        rest := rest + t_w[r] * (k1 + 1.0::float8);
        r := r - 1;
      END LOOP;
    END IF;
    EXECUTE q INTO ids, scores, nth, lb
      USING t_lex, t_w, r, rest, lb, n, k1, b, wa, wb, wc, avgdl;
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
  SELECT x.lexeme COLLATE "C" AS lexeme, max(cardinality(x.positions))::float8 AS qtf
  FROM (SELECT DISTINCT c FROM unnest({langs}) AS c) l,
       unnest(to_tsvector(l.c, %(lex_q)s)) x
  GROUP BY 1),
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


def stats_sources(corpus_ids: list[int]) -> dict[str, list[str]]:
    """Table names vectord_bm25_query reads for these corpora."""
    names = [_names(cid) for cid in corpus_ids]
    return {"stats": [n[1] for n in names], "dfs": [n[2] for n in names]}


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
            langs=langs, stats=stats_table(corpus_id), dfs=dfs_table(corpus_id),
            budget=sql.Literal(int(budget)))
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


def _bm25(table: sql.Identifier, corpus_id: int, languages: list[str] | None,
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
        bm25=_bm25(table, corpus_id, languages, where, filtered, exhaustive, budget, given),
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
