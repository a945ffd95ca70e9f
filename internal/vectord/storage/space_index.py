"""The shared vector index of each embedding space: one HNSW graph over many corpora.

Every corpus keeps its own items table (the system of record, with its own HNSW graph:
a search of one corpus reads it). When two corpora or more share (dimension, metric,
model, precision), their vectors are also in one table of their space, `vectord_space_<id>`
(corpus id, item id, vector), with one HNSW graph over all of them: a search over
several corpora of a space reads it once instead of once per corpus. A corpus alone in
its space keeps no copy (nothing would read it); the second to join copies both.

A derived index, rebuilt from the items tables whenever needed. Writes pay only for
noting which ids changed (`vectord_space_pending`, by statement-level triggers in the
writer's transaction); the applier moves their vectors into the shared graph in the
background, in batches, and a search over a corpus with changes pending reads the
corpus's own graph instead (so a write acknowledged before a search is in its answer
either way). `attach` makes a corpus a member (at creation, when a deferred index is
built, at start-up for corpora from before spaces, and when a corpus's model label
changes); a deleted corpus's rows are left to `reclaim`.
Measured: keeping the shared graph in the writer's transaction made a bulk upsert 1.73x
slower (two HNSW inserts per item); noting the ids costs little
(docs/decisions/0007-shared-vector-index.md).
"""

from __future__ import annotations

from typing import Any

import psycopg
import structlog
from psycopg import sql

from internal.api.vectord import Corpus
from internal.vectord import tables
from internal.vectord.lexical import sql_index
from internal.vectord.storage import schema

log = structlog.get_logger()

ENSURE_SPACE = """
INSERT INTO vectord_spaces (dim, metric, model, precision)
VALUES (%(dim)s, %(metric)s, %(model)s, %(precision)s)
ON CONFLICT (dim, metric, model, precision) DO NOTHING RETURNING id"""
FIND_SPACE = """
SELECT id FROM vectord_spaces WHERE dim = %(dim)s AND metric = %(metric)s AND model = %(model)s
AND precision = %(precision)s"""
SET_SPACE = "UPDATE vectord_corpora SET space_id = %(space)s WHERE id = %(id)s"
UNATTACHED = """
SELECT c.id, c.name FROM vectord_corpora c
WHERE c.space_id IS NULL
  AND EXISTS (SELECT 1 FROM pg_class WHERE relname = 'vectord_items_' || c.id || '_hnsw')
ORDER BY c.id"""
# The space's other members, and whether their vectors are in it (its triggers exist).
MEMBERS = """
SELECT c.id, EXISTS (SELECT 1 FROM pg_trigger g
                     WHERE g.tgrelid = to_regclass('vectord_items_' || c.id)
                       AND g.tgname = 'vectord_space_ins')
FROM vectord_corpora c WHERE c.space_id = %(sid)s AND c.id <> %(cid)s ORDER BY c.id"""
# pg_advisory_xact_lock(SPACE_LOCK_CLASS, space id): one attach at a time per space.
SPACE_LOCK_CLASS = 0x5BACE
RECLAIM_NEXT = "SELECT space_id, corpus_id FROM vectord_space_reclaim ORDER BY 1, 2 LIMIT 1"
RECLAIM_BATCH = """
DELETE FROM {space} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {space} WHERE corpus_id = %(cid)s LIMIT %(n)s))"""
RECLAIM_DONE = "DELETE FROM vectord_space_reclaim WHERE space_id = %(sid)s AND corpus_id = %(cid)s"
RECLAIM_BATCH_ROWS = 5000
PENDING_FORGET = "DELETE FROM vectord_space_pending WHERE space_id = %(sid)s AND corpus_id = %(cid)s"
PENDING_NEXT = "SELECT space_id, corpus_id FROM vectord_space_pending LIMIT 1"
PENDING_TAKE = """
DELETE FROM vectord_space_pending WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM vectord_space_pending WHERE space_id = %(sid)s AND corpus_id = %(cid)s
    LIMIT %(n)s FOR UPDATE SKIP LOCKED))
RETURNING id"""
APPLY_UPSERT = """
INSERT INTO {space} AS s (corpus_id, id, embedding)
SELECT %(cid)s, i.id, i.embedding FROM {items} i WHERE i.id = ANY(%(ids)s)
ON CONFLICT (corpus_id, id) DO UPDATE SET embedding = EXCLUDED.embedding
WHERE s.embedding IS DISTINCT FROM EXCLUDED.embedding"""
APPLY_DELETE = """
DELETE FROM {space} s WHERE s.corpus_id = %(cid)s AND s.id = ANY(%(ids)s)
AND NOT EXISTS (SELECT 1 FROM {items} i WHERE i.id = s.id)"""
APPLY_BATCH = 500  # ids per applier transaction (an HNSW insert each: about half a second)

TRIGGERS = (
    ("vectord_space_ins", "INSERT", "REFERENCING NEW TABLE AS new_rows"),
    ("vectord_space_upd", "UPDATE", "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ("vectord_space_del", "DELETE", "REFERENCING OLD TABLE AS old_rows"),
)


def space_table(space_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_space_{int(space_id)}")


def space_hnsw(space_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_space_{int(space_id)}_hnsw")


def model_key(corpus: Corpus) -> str:
    return corpus.model or ""


async def _space(conn: psycopg.AsyncConnection[Any], corpus: Corpus, m: int, efc: int) -> int:
    """The id of the corpus's space, its table and HNSW graph created with it."""
    key = {"dim": corpus.dim, "metric": corpus.metric, "model": model_key(corpus),
           "precision": corpus.precision}
    cur = await conn.execute(ENSURE_SPACE, key)
    row = await cur.fetchone()
    if row is None:  # another transaction made it (and committed: the insert waited)
        cur = await conn.execute(FIND_SPACE, key)
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])
    sid = int(row[0])
    await conn.execute(sql.SQL("""CREATE TABLE {t} (
        corpus_id bigint NOT NULL,
        id        text COLLATE "C" NOT NULL,
        embedding {vtype} NOT NULL,
        PRIMARY KEY (corpus_id, id))""").format(
        t=space_table(sid), vtype=schema.vector_type(corpus.precision, corpus.dim)))
    await conn.execute(_hnsw_sql(sid, corpus, m, efc))
    return sid


def _hnsw_sql(space_id: int, corpus: Corpus, m: int, efc: int) -> sql.Composed:
    """The space's graph: over its vectors, in the precision of its corpora."""
    return schema.hnsw_sql(space_hnsw(space_id), space_table(space_id),
                           schema.index_key(corpus.precision, corpus.metric),
                           m, efc)


async def attach(conn: psycopg.AsyncConnection[Any], corpus: Corpus, m: int, efc: int) -> int:
    """Make the corpus a member of its space; in the caller's transaction, under the
    corpus's write lock (writers wait, nothing is missed).

    A corpus alone in its space keeps no copy there: only a search over two or more
    corpora of a space reads the shared graph, so a lone corpus's copy would double its
    vector storage and HNSW work for nothing. The second member to join copies the
    first in the same transaction, so a space with two members or more has every
    member's vectors (attaches to one space are serialised by a lock on it). Into an
    empty space the rows go before its HNSW graph is built (a bulk build); into a
    populated one they are noted for the applier, which adds them in batches."""
    cid = int(corpus.id)
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (sql_index.LOCK_CLASS, cid))
    sid = await _space(conn, corpus, m, efc)
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (SPACE_LOCK_CLASS, sid))
    cur = await conn.execute(MEMBERS, {"sid": sid, "cid": cid})
    peers = [(int(r[0]), bool(r[1])) for r in await cur.fetchall()]
    if peers:
        uncopied = sorted(p for p, copied in peers if not copied)
        for peer in uncopied:  # in id order; writers never take a second corpus's lock
            await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (sql_index.LOCK_CLASS, peer))
        await _copy(conn, sid, [*uncopied, cid], corpus, m, efc)
    await conn.execute(SET_SPACE, {"space": sid, "id": cid})
    return sid


async def _copy(conn: psycopg.AsyncConnection[Any], sid: int, cids: list[int], corpus: Corpus,
                m: int, efc: int) -> None:
    """Copy the corpora's vectors into space sid and keep them there (triggers)."""
    table = space_table(sid)
    cur = await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {t})").format(t=table))
    row = await cur.fetchone()
    empty = not (row and row[0])
    if empty:  # copy the rows in, then build its graph in bulk (fast)
        await conn.execute(sql.SQL("DROP INDEX IF EXISTS {i}").format(i=space_hnsw(sid)))
    for cid in cids:
        await conn.execute(RECLAIM_DONE, {"sid": sid, "cid": cid})  # its rows are live again
        items = tables.items_table(cid)
        if empty:
            await conn.execute(sql.SQL(
                "INSERT INTO {t} (corpus_id, id, embedding) SELECT %(cid)s, id, embedding "
                "FROM {items}").format(t=table, items=items), {"cid": cid})
        else:
            await conn.execute(sql.SQL(
                "INSERT INTO vectord_space_pending (space_id, corpus_id, id) "
                "SELECT %(sid)s, %(cid)s, id FROM {items} ON CONFLICT DO NOTHING").format(
                items=items), {"sid": sid, "cid": cid})
        for name, event, refs in TRIGGERS:
            await conn.execute(sql.SQL(
                "CREATE OR REPLACE TRIGGER {name} AFTER {event} ON {items} {refs} "
                "FOR EACH STATEMENT EXECUTE FUNCTION vectord_space_sync({sid}, {cid})").format(
                name=sql.Identifier(name), event=sql.SQL(event), items=items,
                refs=sql.SQL(refs), sid=sql.Literal(str(sid)), cid=sql.Literal(str(cid))))
    if empty:
        await conn.execute(_hnsw_sql(sid, corpus, m, efc))


async def detach(conn: psycopg.AsyncConnection[Any], corpus: Corpus) -> None:
    """Stop keeping the corpus in its space (its rows left to the reclaimer); in the
    caller's transaction. For a model label that changes (its space changes)."""
    if corpus.space_id is None:
        return
    for name, _, _ in TRIGGERS:
        await conn.execute(sql.SQL("DROP TRIGGER IF EXISTS {name} ON {items}").format(
            name=sql.Identifier(name), items=tables.items_table(corpus.id)))
    await forget(conn, corpus)
    await conn.execute(SET_SPACE, {"space": None, "id": corpus.id})


async def forget(conn: psycopg.AsyncConnection[Any], corpus: Corpus) -> None:
    """Leave the corpus's rows in its space to the reclaimer (a deleted corpus: instant;
    no search reads them, every space scan names its corpora)."""
    if corpus.space_id is not None:
        await conn.execute(
            "INSERT INTO vectord_space_reclaim (space_id, corpus_id) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING", (corpus.space_id, corpus.id))
        await conn.execute(PENDING_FORGET, {"sid": corpus.space_id, "cid": corpus.id})


async def unattached(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str]]:
    """Corpora with a built HNSW index and no space yet: (id, name)."""
    cur = await conn.execute(UNATTACHED)
    return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]


async def reclaim_some(conn: psycopg.AsyncConnection[Any]) -> int | None:
    """Delete one batch of a deleted (or moved) corpus's rows from its space; the rows
    deleted, or None when nothing is left to reclaim."""
    cur = await conn.execute(RECLAIM_NEXT)
    row = await cur.fetchone()
    if row is None:
        return None
    sid, cid = int(row[0]), int(row[1])
    try:
        cur = await conn.execute(sql.SQL(RECLAIM_BATCH).format(space=space_table(sid)),
                                 {"cid": cid, "n": RECLAIM_BATCH_ROWS})
        done = cur.rowcount
    except psycopg.errors.UndefinedTable:
        done = 0
    if done < RECLAIM_BATCH_ROWS:
        await conn.execute(PENDING_FORGET, {"sid": sid, "cid": cid})
        await conn.execute(RECLAIM_DONE, {"sid": sid, "cid": cid})
    return done


async def apply_some(conn: psycopg.AsyncConnection[Any]) -> int | None:
    """Move one batch of pending ids' vectors into their space (in the caller's
    transaction); the ids applied, or None when nothing is pending."""
    cur = await conn.execute(PENDING_NEXT)
    row = await cur.fetchone()
    if row is None:
        return None
    sid, cid = int(row[0]), int(row[1])
    cur = await conn.execute(PENDING_TAKE, {"sid": sid, "cid": cid, "n": APPLY_BATCH})
    ids = [str(r[0]) for r in await cur.fetchall()]
    cur = await conn.execute("SELECT space_id FROM vectord_corpora WHERE id = %s", (cid,))
    row = await cur.fetchone()
    if not ids or row is None or row[0] != sid:
        return len(ids)  # deleted, or moved to another space: nothing to apply here
    args = {"cid": cid, "ids": ids}
    fmt = {"space": space_table(sid), "items": tables.items_table(cid)}
    try:
        async with conn.transaction():  # a savepoint: a table dropped meanwhile
            await conn.execute(sql.SQL(APPLY_UPSERT).format(**fmt), args)
            await conn.execute(sql.SQL(APPLY_DELETE).format(**fmt), args)
    except psycopg.errors.UndefinedTable:
        pass
    return len(ids)
