-- Chinese and Japanese write words without spaces between them, and PostgreSQL's parser
-- reads a run of their characters as one word: a word inside a sentence would never match.
-- Each run of Han and kana characters is cut into overlapping character bigrams (a lone
-- character stays a unigram), as Elasticsearch's `cjk` analyzer does, after NFKC folds
-- full-width Latin letters and digits to ASCII. Text with no such character is returned
-- as it is (and never normalized).
CREATE OR REPLACE FUNCTION vectord_cjk_split(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $f$
  SELECT CASE
    WHEN t !~ '[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]'
      THEN t
    ELSE (SELECT coalesce(string_agg(
            CASE WHEN m.r[1] IS NULL THEN m.r[2]
                 WHEN length(m.r[1]) = 1 THEN ' ' || m.r[1] || ' '
                 ELSE ' ' || (SELECT string_agg(substr(m.r[1], i, 2), ' ' ORDER BY i)
                              FROM generate_series(1, length(m.r[1]) - 1) AS i) || ' '
            END, '' ORDER BY m.o), '')
          FROM regexp_matches(normalize(t, NFKC),
                 '([\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)'
                 '|([^\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)',
                 'g') WITH ORDINALITY AS m(r, o))
  END
$f$;

-- What the parser reads of a stored field: the field, cut into bigrams for the
-- configurations vectord made for Chinese and Japanese (schema migration 8; named in
-- internal.common.language.CJK_REGCONFIGS), as it is for every other.
CREATE OR REPLACE FUNCTION vectord_lex_text(cfg regconfig, t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
  SELECT CASE WHEN cfg::text IN ('chinese', 'japanese') THEN vectord_cjk_split(t) ELSE t END
$f$;

-- Feeds every items table's generated `lex`, so its value for a stored row must never
-- change: its body changed once, for `chinese` and `japanese` only, configurations that
-- did not exist before that change (migration 8), so no stored row's value moved.
CREATE OR REPLACE FUNCTION vectord_lex_v1(cfg regconfig, title text, body text, tags text[])
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
  SELECT setweight(to_tsvector(cfg, vectord_lex_text(cfg, coalesce(title, ''))), 'A')
      || setweight(to_tsvector(cfg, vectord_lex_text(cfg, coalesce(body, ''))), 'B')
      || setweight(to_tsvector(cfg, vectord_lex_text(cfg, coalesce(array_to_string(tags, ' '), ''))), 'C')
$f$;

-- A question's terms: its lexemes in each of `langs`, each with its count in the question
-- (qtf). Han and kana runs are cut into bigrams in every language, so a word takes the
-- same position in each. `ql`, the question's language (the dominant language of the
-- corpora searched; internal.common.language.question_language): in any other language
-- only the positions that are words in ql count, so a word that is a stop word in the
-- question's language ("a", "do" in English) never becomes a term matching the pages of
-- another language (Danish keeps "a" and "do"). One language, or ql NULL or not among
-- `langs`: every lexeme counts.
CREATE OR REPLACE FUNCTION vectord_query_terms(langs regconfig[], ql regconfig, q text)
RETURNS TABLE (lexeme text, qtf float8) LANGUAGE plpgsql STABLE PARALLEL SAFE AS $f$
DECLARE
  t text := vectord_cjk_split(coalesce(q, ''));
  ls regconfig[] := ARRAY(SELECT DISTINCT c FROM unnest(langs) AS c);
  words int[];
BEGIN
  -- plpgsql, not sql: its plans are kept for the session (a sql function's were made
  -- anew at every call: 0.40 against 0.10 ms a question in one language).
  IF ql IS NULL OR NOT ql = ANY(ls) OR cardinality(ls) < 2 THEN
    RETURN QUERY SELECT x.lexeme, max(cardinality(x.positions))::float8
      FROM unnest(ls) AS l(c), unnest(to_tsvector(l.c, t)) x GROUP BY x.lexeme;
    RETURN;
  END IF;
  words := ARRAY(SELECT p FROM unnest(to_tsvector(ql, t)) x, unnest(x.positions) p);
  RETURN QUERY SELECT s.lexeme, s.n FROM (
    SELECT x.lexeme,
           max(CASE WHEN l.c = ql THEN cardinality(x.positions)
                    ELSE (SELECT count(*) FROM unnest(x.positions) p WHERE p = ANY(words))
               END)::float8 AS n
    FROM unnest(ls) AS l(c), unnest(to_tsvector(l.c, t)) x
    GROUP BY x.lexeme) s
  WHERE s.n > 0;
END
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
  ql regconfig;
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
  -- The question's language: the one most items of the corpora are in (as
  -- internal.common.language.question_language and lexical.QUESTION_LANGUAGE say).
  IF cardinality(stats) > 0 THEN
    EXECUTE (SELECT 'SELECT s.language FROM ('
                    || string_agg(format('SELECT language, n FROM %I', x), ' UNION ALL ')
                    || ') s WHERE s.n > 0 GROUP BY s.language '
                    || 'ORDER BY sum(s.n) DESC, s.language::text COLLATE "C" LIMIT 1'
             FROM unnest(stats) AS x) INTO ql;
  END IF;
  SELECT array_agg(s.lexeme ORDER BY s.lexeme), array_agg(s.qtf ORDER BY s.lexeme)
    INTO q_lex, q_tf
    FROM (SELECT t.lexeme COLLATE "C" AS lexeme, t.qtf
          FROM vectord_query_terms(all_langs, ql, q) t) s;
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
