"""The statements of a corpus's re-embedding (storage/reembed.py runs the job).

While a corpus moves to another model its items table has a second vector column,
`embedding_next` (the new model's dimension), filled by the job in batches; searches
keep reading `embedding`. A write that changes an item's content clears its
`embedding_next` (a row trigger), so the job embeds it again: every write reaches both
vectors. When every row has one, an HNSW graph is built over the new column, then one
transaction under the corpus's write lock swaps the columns and the registry row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from internal.api.vectord import Corpus
from internal.vectord import tables
from internal.vectord.lexical import sql_index
from internal.vectord.storage import schema, space_index
from internal.vectord.storage.parts import CORPUS_COLUMNS

Conn = psycopg.AsyncConnection[Any]

START = """
INSERT INTO vectord_reembed (corpus_id, model, dim) VALUES (%(id)s, %(model)s, %(dim)s)
ON CONFLICT (corpus_id) DO NOTHING RETURNING corpus_id"""
JOB = """
SELECT corpus_id, model, dim, error, kind, precision, position, hnsw_m, hnsw_ef_construction
FROM vectord_reembed WHERE corpus_id = %(id)s"""
JOBS = "SELECT corpus_id FROM vectord_reembed ORDER BY corpus_id"
# The corpora of some models with no re-embedding under way (a superseded model's).
TO_MOVE = f"""
SELECT {CORPUS_COLUMNS} FROM vectord_corpora AS c WHERE c.model = ANY(%(models)s)
AND NOT EXISTS (SELECT 1 FROM vectord_reembed AS r WHERE r.corpus_id = c.id) ORDER BY c.name"""
FAIL = "UPDATE vectord_reembed SET error = %(error)s WHERE corpus_id = %(id)s"
FINISH = "DELETE FROM vectord_reembed WHERE corpus_id = %(id)s"
PENDING = """
SELECT id, title, text, content_hash FROM {t} WHERE embedding_next IS NULL AND id > %(after)s
ORDER BY id LIMIT %(n)s"""
FILL = """
UPDATE {t} AS t SET embedding_next = v.embedding
FROM unnest(%(ids)s::text[], %(hashes)s::text[], %(vecs)s::vector[]) AS v(id, hash, embedding)
WHERE t.id = v.id AND t.content_hash = v.hash"""
PROGRESS = "SELECT count(*), count(embedding_next) FROM {t}"
# The switch's check under the lock: no row without its new vector.
MISSING = "SELECT EXISTS (SELECT 1 FROM {t} WHERE embedding_next IS NULL)"


@dataclass(frozen=True)
class Job:
    """A row of vectord_reembed: a re-embedding (kind "reembed": model, dim) or a
    conversion to another precision (kind "convert": precision, position)."""

    corpus_id: int
    model: str
    dim: int
    error: str | None
    kind: str = "reembed"
    precision: str | None = None
    position: str | None = None  # the last id a conversion's copy took
    # A rebuild of the graph (kind "reindex", storage/reindex.py): its new settings.
    hnsw_m: int | None = None
    hnsw_ef_construction: int | None = None


def next_index(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_items_{int(corpus_id)}_hnsw_next")


async def start(conn: Conn, corpus: Corpus, model: str, dim: int) -> bool:
    """Begin moving the corpus to model (in the caller's transaction); False when a
    re-embedding of it already runs."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (sql_index.LOCK_CLASS, corpus.id))
    cur = await conn.execute(START, {"id": corpus.id, "model": model, "dim": dim})
    if await cur.fetchone() is None:
        return False
    t = tables.items_table(corpus.id)
    await conn.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN IF EXISTS embedding_next").format(t=t))
    # In the corpus's precision: the switch renames it `embedding`.
    await conn.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN embedding_next {vtype}").format(
        t=t, vtype=schema.vector_type(corpus.precision, dim)))
    for stmt in schema.layout_sql(corpus.id, "embedding_next"):  # renamed `embedding` at the switch
        await conn.execute(stmt)
    await conn.execute(sql.SQL(
        "CREATE OR REPLACE TRIGGER vectord_reembed_stale BEFORE UPDATE ON {t} "
        "FOR EACH ROW EXECUTE FUNCTION vectord_reembed_stale()").format(t=t))
    return True


async def job(conn: Conn, corpus_id: int) -> Job | None:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(JOB, {"id": corpus_id})
    row = await cur.fetchone()
    return None if row is None else Job(int(row["corpus_id"]), str(row["model"]),
                                        int(row["dim"]), row["error"], str(row["kind"]),
                                        row["precision"], row["position"], row["hnsw_m"],
                                        row["hnsw_ef_construction"])


async def jobs(conn: Conn) -> list[int]:
    cur = await conn.execute(JOBS)
    return [int(r[0]) for r in await cur.fetchall()]


async def to_move(conn: Conn, models: list[str]) -> list[Corpus]:
    """The corpora of models with no re-embedding under way, in name order."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(TO_MOVE, {"models": models})
    return [Corpus(**row) for row in await cur.fetchall()]


async def pending(conn: Conn, corpus_id: int, n: int, after: str = "") -> list[dict[str, Any]]:
    """Up to n items without their new vector, ids after `after`, in id order: id, title,
    text, content_hash."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql.SQL(PENDING).format(t=tables.items_table(corpus_id)),
                      {"n": n, "after": after})
    return list(await cur.fetchall())


async def fill(conn: Conn, corpus_id: int, rows: list[dict[str, Any]],
               vectors: list[list[float]]) -> None:
    """Store the new vectors of rows whose content is still what was embedded."""
    await conn.execute(sql.SQL(FILL).format(t=tables.items_table(corpus_id)), {
        "ids": [r["id"] for r in rows], "hashes": [r["content_hash"] for r in rows],
        "vecs": ["[" + ",".join(repr(float(x)) for x in v) + "]" for v in vectors]})
    await conn.execute(FAIL, {"id": corpus_id, "error": None})  # going on: no error now


async def progress(conn: Conn, corpus_id: int) -> tuple[int, int]:
    """(items, items with their new vector)."""
    cur = await conn.execute(sql.SQL(PROGRESS).format(t=tables.items_table(corpus_id)))
    row = await cur.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


async def fail(conn: Conn, corpus_id: int, error: str) -> None:
    await conn.execute(FAIL, {"id": corpus_id, "error": error[:2000]})


async def build_next_index(conn: Conn, corpus: Corpus, dim: int, m: int, efc: int) -> None:
    """The HNSW graph over the new vectors, built before the switch (autocommit conn:
    CONCURRENTLY, so writers go on)."""
    del dim  # the column's type holds it
    key = schema.index_key(corpus.precision, corpus.metric, "embedding_next")
    await conn.execute(schema.hnsw_sql(next_index(corpus.id), tables.items_table(corpus.id),
                                       key, m, efc, concurrently=True))


async def switch(conn: Conn, corpus: Corpus, model: str, dim: int) -> bool:
    """In one transaction under the corpus's write lock: the new vectors become the
    corpus's, its registry row says the new model and dimension, its old space lets it
    go (the maintainer attaches it to the new one). False: a row lost its new vector
    meanwhile (a write): the job fills it and tries again."""
    cid = int(corpus.id)
    t = tables.items_table(cid)
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (sql_index.LOCK_CLASS, cid))
    cur = await conn.execute(sql.SQL(MISSING).format(t=t))
    row = await cur.fetchone()
    if row and row[0]:
        return False
    await space_index.detach(conn, corpus)
    await conn.execute(sql.SQL("DROP TRIGGER IF EXISTS vectord_reembed_stale ON {t}").format(t=t))
    await conn.execute(sql.SQL("DROP INDEX IF EXISTS {i}").format(i=tables.hnsw_index(cid)))
    await conn.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN embedding").format(t=t))
    await conn.execute(sql.SQL("ALTER TABLE {t} RENAME COLUMN embedding_next TO embedding")
                       .format(t=t))
    await conn.execute(sql.SQL("ALTER TABLE {t} ALTER COLUMN embedding SET NOT NULL").format(t=t))
    await conn.execute(sql.SQL("ALTER INDEX IF EXISTS {a} RENAME TO {b}").format(
        a=next_index(cid), b=tables.hnsw_index(cid)))
    await conn.execute(
        "UPDATE vectord_corpora SET model = %(model)s, dim = %(dim)s, space_id = NULL "
        "WHERE id = %(id)s", {"model": model, "dim": dim, "id": cid})
    await conn.execute(FINISH, {"id": cid})
    return True


async def cancel(conn: Conn, corpus_id: int) -> None:
    """Forget a re-embedding (its corpus is being deleted: the table goes with it)."""
    await conn.execute(FINISH, {"id": corpus_id})
