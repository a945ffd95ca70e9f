"""vectord's schema: versioned, idempotent migrations and the per-corpus items tables.

Each corpus's items live in their own table, `vectord_items_<registry id>`, so each
has its own vector(dim) column and its own HNSW index with the metric's operator
class. The table name comes from the numeric id, never from the user's corpus name.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import structlog
from psycopg import sql

from internal.api.vectord import Corpus
from internal.vectord import sqlfiles, tables
from internal.vectord.lexical import sql_index

log = structlog.get_logger()

# Any constant will do as long as every replica uses the same one.
MIGRATION_LOCK_ID = 0x7EC70D

# Append-only: a migration, once released, is never edited; add a new version.
MIGRATIONS: list[tuple[int, str]] = [
    (1, """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS vectord_corpora (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    dim           integer NOT NULL CHECK (dim BETWEEN 1 AND 2000),
    metric        text NOT NULL CHECK (metric IN ('cosine', 'l2', 'ip')),
    language      text NOT NULL,
    model         text,
    keyword_index text NOT NULL CHECK (keyword_index IN ('trgm', 'scan')),
    created_at    timestamptz NOT NULL DEFAULT now()
);
"""),
    # The lexical index's versions and change log (sql_index.py's trigger writes them, the
    # cached index of lexical/memory_index.py reads them). A corpus with no row is at version 0.
    (2, """
CREATE TABLE IF NOT EXISTS vectord_lex_versions (
    corpus_id bigint PRIMARY KEY,
    version   bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS vectord_lex_changes (
    corpus_id bigint NOT NULL,
    version   bigint NOT NULL,
    lexemes   text[] NOT NULL,
    PRIMARY KEY (corpus_id, version)
);
"""),
    # Embedding spaces (storage/space_index.py): the corpora sharing (dimension, metric, model)
    # have their vectors in one shared table with one HNSW graph, kept by triggers on
    # their items tables. space_id NULL: not attached yet (a deferred index not built,
    # or a corpus from before spaces, attached at start-up). Deleted corpora's rows wait
    # in vectord_space_reclaim for the background reclaimer.
    (3, """
CREATE TABLE IF NOT EXISTS vectord_spaces (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dim    integer NOT NULL,
    metric text NOT NULL,
    model  text NOT NULL,  -- '' when the corpora record no model
    UNIQUE (dim, metric, model)
);
ALTER TABLE vectord_corpora ADD COLUMN IF NOT EXISTS space_id bigint;
CREATE TABLE IF NOT EXISTS vectord_space_reclaim (
    space_id  bigint NOT NULL,
    corpus_id bigint NOT NULL,
    PRIMARY KEY (space_id, corpus_id)
);
"""),
    # Re-embeddings under way (storage/reembed.py): the model and dimension a corpus moves to;
    # the new vectors are in its items table's embedding_next column until the switch.
    (4, """
CREATE TABLE IF NOT EXISTS vectord_reembed (
    corpus_id  bigint PRIMARY KEY,
    model      text NOT NULL,
    dim        integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    error      text
);
"""),
    # Ids whose vectors a space's shared index has yet to take (storage/space_index.py).
    (5, """
CREATE TABLE IF NOT EXISTS vectord_space_pending (
    space_id  bigint NOT NULL,
    corpus_id bigint NOT NULL,
    id        text COLLATE "C" NOT NULL,
    PRIMARY KEY (space_id, corpus_id, id)
);
"""),
    # Every corpus's items table gets the row layout of `layout_sql`
    # (docs/decisions/0043-row-layout.md): a catalog change; rows written before keep
    # theirs until rewritten.
    (6, """
DO $$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
             WHERE c.relkind = 'r' AND c.relname ~ '^vectord_items_[0-9]+$'
               AND pg_table_is_visible(c.oid) LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding SET STORAGE MAIN, '
                       'SET (toast_tuple_target = 4000)', t);
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = 'lex'
                   AND NOT attisdropped) THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN lex SET STORAGE EXTERNAL', t);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t
                   AND attname = 'embedding_next' AND NOT attisdropped) THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding_next SET STORAGE MAIN', t);
        END IF;
    END LOOP;
END $$;
"""),
    # API keys (internal.vectord.keys.store): only the SHA-256 of a secret and the key
    # tenant tokens are signed with (derived from the secret).
    (7, """
CREATE TABLE IF NOT EXISTS lakehouse_keys (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    secret_hash  bytea NOT NULL,
    signing_key  bytea NOT NULL,
    actions      text[] NOT NULL,
    corpora      text[] NOT NULL,
    expires_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);
"""),
    # A revoked key's row stays, marked (its holder is told "key revoked", not "unknown").
    (8, """
ALTER TABLE lakehouse_keys ADD COLUMN IF NOT EXISTS revoked_at timestamptz;
"""),
    # Text-search configurations for the languages PostgreSQL ships none for, so their
    # items are stored as what they are (internal.common.language.CJK_REGCONFIGS):
    # `simple`'s lower-casing with English stop words (Elasticsearch's `cjk` analyzer's
    # `_cjk_` set is English), over text vectord_lex_text cuts into character bigrams.
    # A database that has a configuration of either name already keeps its own.
    (9, """
DO $$
DECLARE cfg text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = 'vectord_cjk'
                   AND dictnamespace = current_schema()::regnamespace) THEN
        CREATE TEXT SEARCH DICTIONARY vectord_cjk (TEMPLATE = pg_catalog.simple,
                                                    STOPWORDS = english);
    END IF;
    FOREACH cfg IN ARRAY ARRAY['chinese', 'japanese'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = cfg) THEN
            EXECUTE format('CREATE TEXT SEARCH CONFIGURATION %I (COPY = pg_catalog.simple)',
                           cfg);
            EXECUTE format('ALTER TEXT SEARCH CONFIGURATION %I ALTER MAPPING FOR asciiword, '
                           'word, numword, asciihword, hword, numhword, hword_asciipart, '
                           'hword_part, hword_numpart WITH vectord_cjk', cfg);
        END IF;
    END LOOP;
END $$;
"""),
    # Precisions (docs/decisions/0156-float16-vectors.md): a corpus's vectors and graph as
    # halfvec (float16) or vector (float32); every corpus before this one is float32. A
    # space is one precision too. A job of vectord_reembed is a re-embedding or a conversion to
    # another precision (`position`: the last id its copy took).
    (10, """
ALTER TABLE vectord_corpora
    ADD COLUMN IF NOT EXISTS precision text NOT NULL DEFAULT 'float32'
        CHECK (precision IN ('float16', 'float32'));
ALTER TABLE vectord_spaces ADD COLUMN IF NOT EXISTS precision text NOT NULL DEFAULT 'float32';
ALTER TABLE vectord_spaces DROP CONSTRAINT IF EXISTS vectord_spaces_dim_metric_model_key;
ALTER TABLE vectord_spaces DROP CONSTRAINT IF EXISTS vectord_spaces_key;  -- run again: idempotent
ALTER TABLE vectord_spaces ADD CONSTRAINT vectord_spaces_key UNIQUE (dim, metric, model, precision);
ALTER TABLE vectord_reembed
    ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'reembed'
        CHECK (kind IN ('reembed', 'convert')),
    ADD COLUMN IF NOT EXISTS precision text,
    ADD COLUMN IF NOT EXISTS position text;
"""),
    # The learned ranker's models (internal.vectord.storage.rankers): versions per playbook
    # and the corpora they rank, each tied to the playbook corpus it was trained on
    # (`playbook_id`, its registry id): a playbook deleted and made again starts without one.
    (11, """
CREATE TABLE IF NOT EXISTS lakehouse_rankers (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    playbook_id     bigint NOT NULL,
    playbook_corpus text NOT NULL,
    corpora         text[] NOT NULL,
    trained_by      text NOT NULL,
    records         integer NOT NULL,
    playbook_count  integer NOT NULL,
    queries         integer NOT NULL,
    examples        integer NOT NULL,
    seconds         double precision NOT NULL,
    trees           integer NOT NULL,
    alpha           double precision NOT NULL,
    reason          text,
    ndcg10_boost    double precision,
    ndcg10_ranker   double precision,
    cv              jsonb NOT NULL DEFAULT '{}',
    features        text[] NOT NULL DEFAULT '{}',
    model           text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS lakehouse_rankers_group
    ON lakehouse_rankers (playbook_corpus, corpora, id DESC);
"""),
    # Per-corpus vector index settings (docs/decisions/0300-index-settings-per-corpus.md):
    # NULL, a corpus from before them, follows [vectord]'s. A job of vectord_reembed may rebuild a corpus's graph
    # with other settings (kind `reindex`: its m and ef_construction). A GIN index over
    # each items table's tags, so a selective tag filter reads its rows, not the table.
    (15, """
ALTER TABLE vectord_corpora
    ADD COLUMN IF NOT EXISTS hnsw_m integer,
    ADD COLUMN IF NOT EXISTS hnsw_ef_construction integer,
    ADD COLUMN IF NOT EXISTS ef_search integer,
    ADD COLUMN IF NOT EXISTS exact_scan_rows integer;
ALTER TABLE vectord_reembed DROP CONSTRAINT IF EXISTS vectord_reembed_kind_check;
ALTER TABLE vectord_reembed ADD CONSTRAINT vectord_reembed_kind_check
    CHECK (kind IN ('reembed', 'convert', 'reindex'));
ALTER TABLE vectord_reembed
    ADD COLUMN IF NOT EXISTS hnsw_m integer,
    ADD COLUMN IF NOT EXISTS hnsw_ef_construction integer;
DO $$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
             WHERE c.relkind = 'r' AND c.relname ~ '^vectord_items_[0-9]+$'
               AND pg_table_is_visible(c.oid) LOOP
        EXECUTE format('CREATE INDEX IF NOT EXISTS %s ON %s USING gin (tags)',
                       quote_ident(t::text || '_tags'), t);
    END LOOP;
END $$;
"""),
    # What a corpus is about (internal.vectord.storage.profiles): the description its owner
    # gives, and the profile vectord keeps from its contents in the background (its
    # lexemes' document frequencies, the words that make them, the name and description
    # embedded by its model), read by the fan-out's resource selection. `version`: the
    # corpus's lexical version the profile reflects; `about`: the name and description it
    # was built with.
    (16, """
ALTER TABLE vectord_corpora ADD COLUMN IF NOT EXISTS description text;
CREATE TABLE IF NOT EXISTS vectord_profiles (
    corpus_id  bigint PRIMARY KEY REFERENCES vectord_corpora (id) ON DELETE CASCADE,
    version    bigint NOT NULL,
    about      text NOT NULL,
    documents  bigint NOT NULL,
    sampled    integer NOT NULL,
    terms      jsonb NOT NULL,
    words      jsonb NOT NULL,
    described  jsonb NOT NULL,
    about_vector real[],
    about_model  text,
    build_ms   double precision NOT NULL,
    built_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""),
]

OPERATOR = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}
# The column type of each precision; must match Corpus.precision.
VECTOR_TYPE = {"float32": "vector", "float16": "halfvec"}


def opclass(precision: str, metric: str) -> str:
    """The HNSW operator class of a precision's column and a metric ("halfvec_cosine_ops")."""
    if metric not in OPERATOR:
        raise ValueError(f"metric {metric!r}")
    return f"{VECTOR_TYPE[precision]}_{metric}_ops"


def vector_type(precision: str, dim: int) -> sql.Composed:
    """The column type of a precision and dimension: vector(384), halfvec(384)."""
    return sql.SQL("{}({})").format(sql.SQL(VECTOR_TYPE[precision]), sql.Literal(int(dim)))

# The expression the keyword mode searches; the trigram index is over exactly this.
KEYWORD_EXPR = sql.SQL("lower(coalesce(title, '') || ' ' || text)")


@dataclass(frozen=True)
class DbInfo:
    """What the server offers, found at start-up."""

    version: int  # schema version after migrating
    vector_version: str
    trgm: bool  # pg_trgm installed: keyword search uses a trigram GIN index


# The shared vector index's upkeep (internal.vectord.storage.space_index), kept here with the rest
# of the DDL that migrate() installs.
SPACE_FUNCTIONS_SQL = sqlfiles.read("storage/space_functions.sql")

# Re-embedding's functions (internal.vectord.storage.reembed_sql), installed by migrate() too.
REEMBED_FUNCTIONS_SQL = sqlfiles.read("storage/reembed_functions.sql")

# A conversion's mirror of writes (internal.vectord.storage.convert_sql), installed by migrate() too.
CONVERT_FUNCTIONS_SQL = sqlfiles.read("storage/convert_functions.sql")


async def migrate(dsn: str) -> DbInfo:
    """Bring the schema up to date; safe when several replicas start together."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_ID,))
        try:
            await conn.execute("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    component text NOT NULL,
                    version integer NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (component, version))""")
            cur = await conn.execute(
                "SELECT coalesce(max(version), 0) FROM schema_migrations WHERE component = 'vectord'")
            row = await cur.fetchone()
            current = int(row[0]) if row else 0
            for version, ddl in MIGRATIONS:
                if version <= current:
                    continue
                async with conn.transaction():
                    await conn.execute(ddl)
                    await conn.execute(
                        "INSERT INTO schema_migrations (component, version) VALUES ('vectord', %s)",
                        (version,))
                log.info("schema_migrated", component="vectord", version=version)
                current = version
            trgm = await _ensure_trgm(conn)
            # The shared functions (BM25, the triggers' of the lexical index, the spaces,
            # re-embedding and conversion) are CREATE OR REPLACE: refreshed on every start, under
            # this lock, so a new vectord's functions reach databases whose corpora
            # predate them. Only here: two transactions replacing one function at once
            # fail ("tuple concurrently updated"), so creating a corpus never does.
            async with conn.transaction():
                await sql_index.ensure_functions(conn)
                await conn.execute(SPACE_FUNCTIONS_SQL)
                await conn.execute(REEMBED_FUNCTIONS_SQL)
                await conn.execute(CONVERT_FUNCTIONS_SQL)
            cur = await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = await cur.fetchone()
            vector_version = str(row[0]) if row else "?"
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return DbInfo(version=current, vector_version=vector_version, trgm=trgm)


async def _ensure_trgm(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> bool:
    """Install pg_trgm when the server has it; False means keyword search scans."""
    cur = await conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    if await cur.fetchone() is None:
        log.warning("pg_trgm_unavailable", fallback="keyword search scans without an index")
        return False
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except psycopg.errors.InsufficientPrivilege:
        cur = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        if await cur.fetchone() is None:
            log.warning("pg_trgm_not_permitted", fallback="keyword search scans without an index")
            return False
    return True


def create_items_sql(corpus_id: int, dim: int, keyword_index: str, precision: str
                     ) -> list[sql.Composed]:
    """DDL of one corpus's table and its non-vector indexes."""
    table = tables.items_table(corpus_id)
    stmts = [
        sql.SQL("""CREATE TABLE {table} (
            id           text COLLATE "C" PRIMARY KEY,
            embedding    {vtype} NOT NULL,
            title        text,
            text         text NOT NULL,
            tags         text[] NOT NULL DEFAULT '{{}}',
            metadata     jsonb NOT NULL DEFAULT '{{}}',
            language     regconfig NOT NULL,
            content_hash text NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now())""").format(
            table=table, vtype=vector_type(precision, dim)),
        *layout_sql(corpus_id, "embedding"),
    ]
    return stmts + secondary_indexes_sql(table, f"vectord_items_{int(corpus_id)}", keyword_index)


# The suffixes of an items table's indexes besides its key and its vector index.
SECONDARY_INDEXES = ("metadata", "updated", "tags", "trgm")


def secondary_indexes_sql(table: sql.Identifier, prefix: str, keyword_index: str, *,
                          concurrently: bool = False) -> list[sql.Composed]:
    """An items table's metadata, recency and (with pg_trgm) keyword indexes, named
    `<prefix>_<suffix>` (SECONDARY_INDEXES)."""
    how = sql.SQL("CONCURRENTLY IF NOT EXISTS" if concurrently else "")
    stmts = [
        sql.SQL("CREATE INDEX {how} {name} ON {table} USING gin (metadata jsonb_path_ops)").format(
            how=how, name=sql.Identifier(f"{prefix}_metadata"), table=table),
        sql.SQL("CREATE INDEX {how} {name} ON {table} (updated_at DESC, id)").format(
            how=how, name=sql.Identifier(f"{prefix}_updated"), table=table),
        sql.SQL("CREATE INDEX {how} {name} ON {table} USING gin (tags)").format(
            how=how, name=sql.Identifier(f"{prefix}_tags"), table=table),
    ]
    if keyword_index == "trgm":
        stmts.append(sql.SQL(
            "CREATE INDEX {how} {name} ON {table} USING gin (({expr}) gin_trgm_ops)").format(
            how=how, name=sql.Identifier(f"{prefix}_trgm"), table=table, expr=KEYWORD_EXPR))
    return stmts


# Rows up to this many bytes stay whole in the heap (PostgreSQL's default: about 2 kB).
TOAST_TARGET = 4000


def layout_sql(corpus_id: int, column: str) -> list[sql.Composed]:
    """The row layout of a corpus's items table, for a column just made: the embedding
    (`embedding`, or a re-embedding's `embedding_next`) kept in the row, the lexemes
    (`lex`) out of it, and rows up to TOAST_TARGET bytes whole.

    A search reads every candidate's distance from its row: an embedding moved out of
    line to TOAST (the default for a 384-d vector beside a paragraph of text) costs a
    TOAST lookup a candidate (hybrid's 100-row scan 0.89 against 0.72 ms;
    docs/decisions/0043-row-layout.md). The lexemes are read only to build the lexical index."""
    table = tables.items_table(corpus_id)
    if column == "lex":
        return [sql.SQL("ALTER TABLE {t} ALTER COLUMN lex SET STORAGE EXTERNAL").format(t=table)]
    stmts = [sql.SQL("ALTER TABLE {t} ALTER COLUMN {c} SET STORAGE MAIN").format(
        t=table, c=sql.Identifier(column))]
    if column == "embedding":
        stmts.append(sql.SQL("ALTER TABLE {t} SET (toast_tuple_target = {n})").format(
            t=table, n=sql.Literal(TOAST_TARGET)))
    return stmts


def index_key(precision: str, metric: str, column: str = "embedding") -> sql.Composed:
    """What a corpus's HNSW index is built over: the column, with the operator class of
    its precision and metric."""
    return sql.SQL("{c} {ops}").format(c=sql.Identifier(column),
                                       ops=sql.SQL(opclass(precision, metric)))


def hnsw_sql(name: sql.Identifier, table: sql.Identifier, key: sql.Composed, m: int,
             ef_construction: int, *, concurrently: bool = False) -> sql.Composed:
    """CREATE INDEX (IF NOT EXISTS) name ON table USING hnsw (key) WITH (m, ef_construction)."""
    return sql.SQL(
        "CREATE INDEX {how} IF NOT EXISTS {name} ON {table} USING hnsw ({key}) "
        "WITH (m = {m}, ef_construction = {efc})").format(
        how=sql.SQL("CONCURRENTLY" if concurrently else ""), name=name, table=table, key=key,
        m=sql.Literal(int(m)), efc=sql.Literal(int(ef_construction)))


def create_hnsw_sql(corpus: Corpus, m: int, ef_construction: int) -> sql.Composed:
    """The corpus's own vector index over its items table."""
    return hnsw_sql(tables.hnsw_index(corpus.id), tables.items_table(corpus.id),
                    index_key(corpus.precision, corpus.metric),
                    m, ef_construction)
