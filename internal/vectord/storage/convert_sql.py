"""The statements of a corpus's conversion to another precision (storage/convert.py runs it).

The corpus's items move to a second table, `vectord_items_<id>_next`, made like its items
table with the vector column in the new precision. A copy in batches of ids fills it,
each batch under the corpus's write lock (no write falls between a batch's read and its
insert); statement triggers mirror every write meanwhile. Once the copy is done its
indexes are built concurrently; then one transaction under the corpus's locks drops the
old table and gives the new one its name, its indexes' names and its triggers. Searches
read the old table until that commit, the new one after it.

A second table, not a second column as re-embedding adds: a dropped column keeps its
bytes in every row until the row is written again, so the float32 vectors would stay in
the heap beside the float16 ones, and each row's rewrite would leave a dead copy too
(docs/decisions/0157-precision-conversion-online.md).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from internal.api.vectord import Corpus
from internal.vectord import tables
from internal.vectord.lexical import sql_index
from internal.vectord.storage import schema, space_index

Conn = psycopg.AsyncConnection[Any]

START = """
INSERT INTO vectord_reembed (corpus_id, kind, model, dim, precision)
VALUES (%(id)s, 'convert', %(model)s, %(dim)s, %(precision)s)
ON CONFLICT (corpus_id) DO NOTHING RETURNING corpus_id"""
# Every column a row holds but `lex`, which the new table generates itself.
COLUMNS = "id, embedding, title, text, tags, metadata, language, content_hash, created_at, updated_at"
# One batch, in id order after the last id copied; an id a mirrored write put there first
# is newer than this read and stays. Its count and last id.
COPY = f"""
WITH batch AS (SELECT {COLUMNS} FROM {{items}} WHERE id > %(after)s ORDER BY id LIMIT %(n)s),
ins AS (INSERT INTO {{next}} ({COLUMNS}) SELECT {COLUMNS} FROM batch ON CONFLICT (id) DO NOTHING)
SELECT count(*), max(id) FROM batch"""
ADVANCE = "UPDATE vectord_reembed SET position = %(last)s, error = NULL WHERE corpus_id = %(id)s"
PROGRESS = "SELECT (SELECT count(*) FROM {next}), (SELECT count(*) FROM {items})"
INVALID_INDEXES = """
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = to_regclass(%(t)s) AND NOT i.indisvalid"""
HAS_INDEX = "SELECT to_regclass(%(name)s) IS NOT NULL"
FINISH = "DELETE FROM vectord_reembed WHERE corpus_id = %(id)s"
MIRRORS = (
    ("vectord_convert_ins", "INSERT", "REFERENCING NEW TABLE AS new_rows"),
    ("vectord_convert_upd", "UPDATE", "REFERENCING NEW TABLE AS new_rows"),
    ("vectord_convert_del", "DELETE", "REFERENCING OLD TABLE AS old_rows"),
)
# A switch waits this long for the searches and writes in flight on the old table; past
# it, it lets go (the searches it held up go on) and is tried again.
SWITCH_LOCK_TIMEOUT = "2s"


def next_name(corpus_id: int) -> str:
    return f"vectord_items_{int(corpus_id)}_next"


def next_table(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(next_name(corpus_id))


async def start(conn: Conn, corpus: Corpus, precision: str) -> bool:
    """Begin moving the corpus to `precision` (in the caller's transaction, under the
    corpus's write lock): the job, the new table, the triggers mirroring writes into it.
    False when a re-embedding or a conversion of the corpus already runs."""
    cid = int(corpus.id)
    items, nxt = tables.items_table(cid), next_table(cid)
    # The table before the write lock, as a writer takes them (its INSERT locks the table,
    # then its trigger the write lock): CREATE TRIGGER below needs the table's SHARE ROW
    # EXCLUSIVE, which would wait for a writer waiting for this transaction's write lock.
    await conn.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(items))
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (sql_index.LOCK_CLASS, cid))
    cur = await conn.execute(START, {"id": cid, "model": corpus.model or "", "dim": corpus.dim,
                                     "precision": precision})
    if await cur.fetchone() is None:
        return False
    for stmt in (
        "DROP TABLE IF EXISTS {next}",  # what an earlier conversion, cancelled, left
        "CREATE TABLE {next} (LIKE {items} INCLUDING DEFAULTS INCLUDING GENERATED "
        "INCLUDING STORAGE INCLUDING COMPRESSION)",
        "ALTER TABLE {next} ALTER COLUMN embedding TYPE {vtype}",  # empty: no rewrite
        "ALTER TABLE {next} ALTER COLUMN embedding SET STORAGE MAIN",  # as layout_sql
        "ALTER TABLE {next} ADD PRIMARY KEY (id)",
        "ALTER TABLE {next} SET (toast_tuple_target = {toast})",
    ):
        await conn.execute(sql.SQL(stmt).format(
            next=nxt, items=items, vtype=schema.vector_type(precision, corpus.dim),
            toast=sql.Literal(schema.TOAST_TARGET)))
    for name, event, refs in MIRRORS:
        await conn.execute(sql.SQL(
            "CREATE OR REPLACE TRIGGER {name} AFTER {event} ON {items} {refs} "
            "FOR EACH STATEMENT EXECUTE FUNCTION vectord_convert_mirror({next})").format(
            name=sql.Identifier(name), event=sql.SQL(event), items=items, refs=sql.SQL(refs),
            next=sql.Literal(next_name(cid))))
    return True


async def copy(conn: Conn, corpus_id: int, after: str, n: int) -> tuple[int, str]:
    """Copy the next batch after id `after` (in the caller's transaction, under the
    corpus's write lock, which this takes); (rows read, the last id)."""
    cid = int(corpus_id)
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (sql_index.LOCK_CLASS, cid))
    cur = await conn.execute(sql.SQL(COPY).format(items=tables.items_table(cid),
                                                  next=next_table(cid)),
                             {"after": after, "n": n})
    row = await cur.fetchone()
    count, last = (int(row[0]), row[1]) if row else (0, None)
    if last is not None:
        await conn.execute(ADVANCE, {"id": cid, "last": last})
    return count, after if last is None else str(last)


async def progress(conn: Conn, corpus_id: int) -> tuple[int, int]:
    """(items copied, items in the corpus)."""
    cur = await conn.execute(sql.SQL(PROGRESS).format(next=next_table(corpus_id),
                                                      items=tables.items_table(corpus_id)))
    row = await cur.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


async def index_statements(conn: Conn, corpus: Corpus, precision: str, m: int, efc: int
                           ) -> list[sql.Composed]:
    """The new table's indexes, built concurrently (IF NOT EXISTS: a restart goes on):
    the vector index when the corpus has one (a deferred one stays deferred), then the
    others. Invalid leftovers of an interrupted build are dropped first (autocommit conn)."""
    cid = int(corpus.id)
    cur = await conn.execute(INVALID_INDEXES, {"t": next_name(cid)})
    for (name,) in await cur.fetchall():
        await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
            sql.Identifier(str(name))))
    stmts: list[sql.Composed] = []
    cur = await conn.execute(HAS_INDEX, {"name": f"vectord_items_{cid}_hnsw"})
    row = await cur.fetchone()
    if row and row[0]:
        key = schema.index_key(precision, corpus.metric)
        stmts.append(schema.hnsw_sql(sql.Identifier(f"{next_name(cid)}_hnsw"), next_table(cid),
                                     key, m, efc, concurrently=True))
    return stmts + schema.secondary_indexes_sql(next_table(cid), next_name(cid),
                                                corpus.keyword_index, concurrently=True)


async def switch(conn: Conn, corpus: Corpus, precision: str) -> bool:
    """In the caller's transaction, holding the corpus's registry row (FOR UPDATE: the
    writers through vectord wait at their first statement): the old table locked (the
    searches and deletes in flight finish first), then the write lock; the last rows
    copied, the old table dropped, the new one named and given the lexical triggers; the
    registry row says the new precision and its space lets it go (the maintainer attaches
    it to the new one). False when an index of the new table is not built (valid) yet."""
    cid = int(corpus.id)
    items, nxt = tables.items_table(cid), next_table(cid)
    cur = await conn.execute(INVALID_INDEXES, {"t": next_name(cid)})
    if await cur.fetchone() is not None:
        return False
    await conn.execute("SELECT set_config('lock_timeout', %s, true)", (SWITCH_LOCK_TIMEOUT,))
    await conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(items))
    await conn.execute("SELECT set_config('lock_timeout', '0', true)")
    while (await copy(conn, cid, await _position(conn, cid), 5000))[0]:
        pass
    await space_index.detach(conn, corpus)
    await conn.execute(sql.SQL("DROP TABLE {}").format(items))
    await conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(nxt, items))
    prefix, old_prefix = f"vectord_items_{cid}", next_name(cid)
    for suffix in ("pkey", "hnsw", *schema.SECONDARY_INDEXES):
        await conn.execute(sql.SQL("ALTER INDEX IF EXISTS {} RENAME TO {}").format(
            sql.Identifier(f"{old_prefix}_{suffix}"), sql.Identifier(f"{prefix}_{suffix}")))
    await sql_index.install_triggers(conn, items, cid)
    await conn.execute(
        "UPDATE vectord_corpora SET precision = %(precision)s, space_id = NULL WHERE id = %(id)s",
        {"precision": precision, "id": cid})
    await conn.execute(FINISH, {"id": cid})
    return True


async def _position(conn: Conn, corpus_id: int) -> str:
    cur = await conn.execute("SELECT position FROM vectord_reembed WHERE corpus_id = %s",
                             (corpus_id,))
    row = await cur.fetchone()
    return str(row[0]) if row and row[0] is not None else ""


async def drop(conn: Conn, corpus_id: int) -> None:
    """The new table of a conversion, gone with its corpus (in the delete's transaction)."""
    await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(next_table(corpus_id)))
