"""`Store`'s item writes and reads: batched upserts (COPY then one INSERT), deletes,
one item, the ids of a corpus."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql
from psycopg.rows import class_row, dict_row
from psycopg.types.json import Jsonb

from internal.api.responses import IdRow, StoredItem
from internal.api.vectord import Corpus, Item
from internal.common.errors import Conflict, InvalidArgument, NotFound
from internal.common.hashing import content_hash
from internal.vectord import tables
from internal.vectord.storage import space_index
from internal.vectord.storage.filters import like_prefix
from internal.vectord.storage.parts import ITEM_COLUMNS, SELECT_CORPUS_ID, Conn
from internal.vectord.storage.spaces import SharedIndexPart

# KEY SHARE: a concurrent delete waits for this upsert, a concurrent label update does not.
LOCK_CORPUS = "SELECT model FROM vectord_corpora WHERE id = %(id)s FOR KEY SHARE"

LABEL_CORPUS = """
UPDATE vectord_corpora SET model = %(model)s WHERE id = %(id)s AND model IS NULL"""

# A batch is COPYed into a temporary table, then written by one INSERT ... SELECT: the
# items table's statement-level triggers (lexical statistics) fire once per batch, not
# once per row, and the batch costs two round trips whatever its size. DISTINCT ON
# keeps the last of repeated ids (ON CONFLICT may touch a row only once a statement).
UPSERT_STAGE = """
CREATE TEMP TABLE vectord_upsert (
    seq integer, id text, embedding vector, title text, text text, tags text[],
    metadata jsonb, language text, content_hash text) ON COMMIT DROP"""

UPSERT_COPY = """
COPY vectord_upsert (seq, id, embedding, title, text, tags, metadata, language, content_hash)
FROM STDIN (FORMAT BINARY)"""

UPSERT_TYPES = ["integer", "text", "vector", "text", "text", "text[]", "jsonb", "text", "text"]

UPSERT = """
INSERT INTO {table} AS t (id, embedding, title, text, tags, metadata, language, content_hash)
SELECT DISTINCT ON (id) id, embedding, title, text, tags, metadata, language::regconfig,
       content_hash
FROM vectord_upsert ORDER BY id, seq DESC
ON CONFLICT (id) DO UPDATE SET
    embedding = EXCLUDED.embedding, title = EXCLUDED.title, text = EXCLUDED.text,
    tags = EXCLUDED.tags, metadata = EXCLUDED.metadata, language = EXCLUDED.language,
    content_hash = EXCLUDED.content_hash, updated_at = now()
WHERE t.content_hash IS DISTINCT FROM EXCLUDED.content_hash
   OR t.embedding IS DISTINCT FROM EXCLUDED.embedding"""

# One item's lexical vector, as the generated column computes it (to find an oversized one).
LEX_PROBE = """
SELECT length(vectord_lex_v1(%(language)s::regconfig, %(title)s, %(text)s, %(tags)s))"""

GET_ITEM = f"""
SELECT {ITEM_COLUMNS}, embedding, content_hash, created_at FROM {{table}} WHERE id = %(id)s"""

DELETE_ITEMS = "DELETE FROM {table} WHERE id = ANY(%(ids)s)"

# Read on the writer's connection after its commit: at or past the commit record (the
# commit flushed it), so a backup or replica that holds this position holds the write
# (the Lakehouse-LSN header). The flush position, not the insert one: at a WAL page
# boundary the insert position points past the next page's header, which a standby's
# replay position (the end of the last record) never reaches until something else is
# written, so a search carrying it waited out `replica_wait` and went to the primary.
WAL_POSITION = "SELECT pg_current_wal_flush_lsn()::text"

LIST_IDS = """
SELECT id, content_hash, updated_at, title FROM {table}
WHERE id LIKE %(prefix)s AND id > %(after)s ORDER BY id LIMIT %(limit)s"""


class ItemsPart(SharedIndexPart):
    """The items of a corpus: written in batches, read one at a time or as ids."""

    async def upsert(self, corpus: Corpus, items: list[PreparedItem], model: str | None
                     ) -> Written:
        """Write the whole batch in one transaction, or nothing."""
        try:
            return await self._upsert(corpus, items, model)
        except psycopg.errors.ProgramLimitExceeded as exc:  # rolled back: nothing written
            raise await self._over_limit(items, exc) from None

    async def _upsert(self, corpus: Corpus, items: list[PreparedItem], model: str | None
                      ) -> Written:
        async with self.write_connection() as conn:
            async with conn.transaction():
                await self._upsert_in(conn, corpus, items, model)
            lsn = await wal_position_on(conn)
        self.spaces_changed.set()  # the applier takes the new vectors into the shared graph
        if model is not None and corpus.model is None:
            self._cache.pop(corpus.name, None)
        return Written(len(items), lsn)

    async def _upsert_in(self, conn: Conn, corpus: Corpus, items: list[PreparedItem],
                         model: str | None) -> None:
        cur = await conn.execute(LOCK_CORPUS, {"id": corpus.id})
        row = await cur.fetchone()
        if row is None:
            raise psycopg.errors.UndefinedTable("corpus dropped")  # with_corpus re-reads
        stored = row[0]
        if model is not None and stored is None:
            await conn.execute(LABEL_CORPUS, {"id": corpus.id, "model": model})
            cur = await conn.execute(LOCK_CORPUS, {"id": corpus.id})
            row = await cur.fetchone()
            stored = row[0] if row else None
            await self._move_space(conn, corpus.id)
        if model is not None and stored != model:
            raise Conflict(
                f"model: corpus {corpus.name!r} holds vectors of model {stored!r}, "
                f"not {model!r}", field="model", code="model_mismatch")
        await conn.execute(UPSERT_STAGE)
        async with conn.cursor() as wcur:
            async with wcur.copy(UPSERT_COPY) as copy:
                copy.set_types(UPSERT_TYPES)
                for seq, it in enumerate(items):
                    await copy.write_row(it.row(seq))
            await wcur.execute(sql.SQL(UPSERT).format(table=tables.items_table(corpus.id)))

    async def _move_space(self, conn: Conn, corpus_id: int) -> None:
        """A corpus given its model label changes space: out of the old, into the new."""
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(SELECT_CORPUS_ID, {"id": corpus_id})
        row = await cur.fetchone()
        if row is None or row["space_id"] is None:
            return
        corpus = Corpus(**row)
        await space_index.detach(conn, corpus)
        await self._attach(conn, msgspec.structs.replace(corpus, space_id=None))

    async def _over_limit(self, items: list[PreparedItem],
                          exc: psycopg.errors.ProgramLimitExceeded) -> InvalidArgument:
        """A 400 naming the item whose text-search vector is over PostgreSQL's 1 MB.

        Only runs after the batch failed: each item's tsvector is computed alone, largest
        first, until one fails (measured:
        docs/decisions/0075-bad-input-refused-while-decoding.md).
        """
        order = sorted(range(len(items)), key=lambda i: -_text_size(items[i]))
        async with self.pool.connection() as conn:
            for i in order:
                it = items[i]
                try:
                    async with conn.transaction():
                        await conn.execute(LEX_PROBE, {"language": it.language, "title": it.title,
                                                       "text": it.text, "tags": it.tags})
                except psycopg.errors.ProgramLimitExceeded:
                    parts = {"text": len(it.text), "title": len(it.title or ""),
                             "tags": sum(len(t) for t in it.tags)}
                    field = f"items[{i}].{max(parts, key=lambda k: parts[k])}"
                    return InvalidArgument(
                        f"{field}: too many distinct words to index (PostgreSQL limits an "
                        "item's text-search vector to 1 MB); split the text", field=field)
        diag = exc.diag.message_primary or "a size limit"
        return InvalidArgument(f"items: an item exceeds PostgreSQL's {diag}", field="items")

    async def get_item(self, corpus: Corpus, item_id: str) -> StoredItem:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql.SQL(GET_ITEM).format(table=tables.items_table(corpus.id)),
                              {"id": item_id})
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"item {item_id!r} not found in corpus {corpus.name!r}", field="id")
        vector = [float(x) for x in row.pop("embedding").to_numpy()]
        return StoredItem(vector=vector, corpus=corpus.name, **row)

    async def delete_items(self, corpus: Corpus, ids: list[str]) -> Written:
        async with self.write_connection() as conn:
            cur = await conn.execute(
                sql.SQL(DELETE_ITEMS).format(table=tables.items_table(corpus.id)), {"ids": ids})
            done = Written(cur.rowcount, await wal_position_on(conn))
        self.spaces_changed.set()
        return done

    async def list_ids(self, corpus: Corpus, prefix: str, after: str, limit: int
                       ) -> list[IdRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(IdRow))
            await cur.execute(sql.SQL(LIST_IDS).format(table=tables.items_table(corpus.id)),
                              {"prefix": like_prefix(prefix), "after": after, "limit": limit})
            return await cur.fetchall()


@dataclass(frozen=True)
class Written:
    """A committed write: how many items it touched, and the WAL position after it."""

    count: int
    lsn: str


async def wal_position_on(conn: Conn) -> str:
    cur = await conn.execute(WAL_POSITION)
    row = await cur.fetchone()
    return str(row[0]) if row else ""


@dataclass
class PreparedItem:
    """One validated item, ready to be written."""

    id: str
    embedding: npt.NDArray[np.float32]
    title: str | None
    text: str
    tags: list[str]
    metadata: dict[str, Any]
    language: str
    content_hash: str

    @staticmethod
    def of(it: Item, embedding: npt.NDArray[np.float32], language: str) -> PreparedItem:
        return PreparedItem(
            id=it.id, embedding=embedding, title=it.title, text=it.text, tags=it.tags,
            metadata=it.metadata, language=language,
            # The hash covers what the caller sent (its language as given, not the one
            # resolved here), so a client can tell unchanged content without detecting.
            content_hash=content_hash(it.title, it.text, it.tags, it.metadata, it.language))

    def row(self, seq: int) -> tuple[Any, ...]:
        """The row COPYed into the staging table (UPSERT_TYPES order)."""
        return (seq, self.id, self.embedding, self.title, self.text, self.tags,
                Jsonb(self.metadata), self.language, self.content_hash)


def _text_size(it: PreparedItem) -> int:
    return len(it.text) + len(it.title or "") + sum(len(t) for t in it.tags)
