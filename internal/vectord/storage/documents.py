"""`Store`'s documents: each document written as text (internal.vectord.documents) is a row
of `vectord_documents` naming its chunks, the corpus's items. A document's chunks and its
row change in one transaction; a document written before the registry existed (the wiki
sync's pages) is known by its chunks' `metadata.parent_id` until it is written again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from internal.api.vectord import Corpus
from internal.common.errors import NotFound
from internal.ingest.chunks import document_of
from internal.vectord import tables
from internal.vectord.storage.filters import like_prefix
from internal.vectord.storage.items import ItemsPart, PreparedItem, Written, wal_position_on
from internal.vectord.storage.parts import Conn
from lakehouse.wire.documents import DocumentRow, StoredDocument

ROWS = """
SELECT id, chunks, content_hash FROM vectord_documents
WHERE corpus_id = %(corpus)s AND id = ANY(%(ids)s)"""

# The stored items of these ids, with the document each one is a chunk of.
CHUNK_STATE = """
SELECT id, content_hash, metadata->>'parent_id' AS parent FROM {items} WHERE id = ANY(%(ids)s)"""

# The chunks of documents the registry does not know: items naming them as parent (the
# metadata's GIN index answers each), and an item stored under the document's own id.
UNREGISTERED = """
SELECT d.doc, i.id FROM unnest(%(docs)s::text[]) AS d(doc)
JOIN LATERAL (SELECT id FROM {items} WHERE metadata @> jsonb_build_object('parent_id', d.doc)
              UNION SELECT id FROM {items} WHERE id = d.doc
                  AND coalesce(metadata->>'parent_id', d.doc) = d.doc) i ON true"""

DELETE_IDS = "DELETE FROM {items} WHERE id = ANY(%(ids)s)"

UPSERT_ROW = """
INSERT INTO vectord_documents AS d (corpus_id, id, chunks, title, language, tags, metadata,
                                    content_hash)
VALUES (%(corpus)s, %(id)s, %(chunks)s, %(title)s, %(language)s, %(tags)s, %(metadata)s,
        %(hash)s)
ON CONFLICT (corpus_id, id) DO UPDATE SET chunks = EXCLUDED.chunks, title = EXCLUDED.title,
    language = EXCLUDED.language, tags = EXCLUDED.tags, metadata = EXCLUDED.metadata,
    content_hash = EXCLUDED.content_hash, updated_at = now()
WHERE d.content_hash IS DISTINCT FROM EXCLUDED.content_hash
   OR d.chunks IS DISTINCT FROM EXCLUDED.chunks"""

DELETE_ROWS = """
DELETE FROM vectord_documents WHERE corpus_id = %(corpus)s AND id = ANY(%(ids)s)
RETURNING id, chunks"""

GET_ROW = """
SELECT id, chunks, title, language, tags, metadata, content_hash, created_at, updated_at
FROM vectord_documents WHERE corpus_id = %(corpus)s AND id = %(id)s"""

CHUNK_ROWS = """
SELECT id, text, title, tags, metadata, language::text AS language, updated_at
FROM {items} WHERE id = ANY(%(ids)s)"""

PARENT_ROWS = """
SELECT id, text, title, tags, metadata, language::text AS language, updated_at
FROM {items} WHERE metadata @> jsonb_build_object('parent_id', %(id)s::text)"""

LIST_ROWS = """
SELECT id, content_hash, cardinality(chunks) AS chunks, title, updated_at
FROM vectord_documents WHERE corpus_id = %(corpus)s AND id LIKE %(prefix)s AND id > %(after)s
ORDER BY id LIMIT %(limit)s"""

COUNTS = """
SELECT corpus_id, count(*) FROM vectord_documents
WHERE %(corpus)s::bigint IS NULL OR corpus_id = %(corpus)s GROUP BY corpus_id"""
FORGET_CORPUS = "DELETE FROM vectord_documents WHERE corpus_id = %(corpus)s"


@dataclass(frozen=True)
class Stored:
    """What the corpus holds of one document before a write: its registered chunks (None:
    not registered) and content hash, and its unregistered chunks."""

    chunks: tuple[str, ...] | None
    content_hash: str | None
    orphans: tuple[str, ...] = ()

    def ids(self) -> set[str]:
        return set(self.chunks or ()) | set(self.orphans)


@dataclass(frozen=True)
class DocumentWrite:
    """One document's write: its row, the chunks to store (with vectors), the stale
    chunk ids to remove."""

    id: str
    chunks: list[str]
    title: str | None
    language: str | None
    tags: list[str]
    metadata: dict[str, Any]
    content_hash: str
    items: list[PreparedItem]
    stale: list[str]


class DocumentsPart(ItemsPart):
    """The documents of a corpus: their state before a write, their writes and deletes,
    one read, a listing."""

    async def stored_documents(self, corpus: Corpus, ids: Sequence[str]
                               ) -> dict[str, Stored]:
        """Each document's registered chunks and hash; for one not registered, the chunks
        naming it (and an item under its own id)."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(ROWS, {"corpus": corpus.id, "ids": list(ids)})
            out = {r["id"]: Stored(tuple(r["chunks"]), r["content_hash"])
                   for r in await cur.fetchall()}
            missing = [i for i in ids if i not in out]
            orphans: dict[str, list[str]] = {}
            if missing:
                await cur.execute(sql.SQL(UNREGISTERED).format(
                    items=tables.items_table(corpus.id)), {"docs": missing})
                for r in await cur.fetchall():
                    orphans.setdefault(r["doc"], []).append(r["id"])
        for doc in missing:
            out[doc] = Stored(None, None, tuple(orphans.get(doc, ())))
        return out

    async def chunk_state(self, corpus: Corpus, ids: Sequence[str]
                          ) -> dict[str, tuple[str, str | None]]:
        """id -> (content hash, the document it is a chunk of) of the stored items."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql.SQL(CHUNK_STATE).format(items=tables.items_table(corpus.id)),
                              {"ids": list(ids)})
            return {r["id"]: (r["content_hash"], r["parent"]) for r in await cur.fetchall()}

    async def write_documents(self, corpus: Corpus, writes: Sequence[DocumentWrite],
                              model: str | None) -> Written:
        """Every document's chunks stored, its stale chunks removed and its row written,
        all in one transaction (a document is never half replaced)."""
        try:
            async with self.write_connection() as conn:
                async with conn.transaction():
                    items = [it for w in writes for it in w.items]
                    if items:
                        await self._upsert_in(conn, corpus, items, model)
                    stale = [i for w in writes for i in w.stale]
                    if stale:
                        await conn.execute(sql.SQL(DELETE_IDS).format(
                            items=tables.items_table(corpus.id)), {"ids": stale})
                    async with conn.cursor() as cur:
                        await cur.executemany(UPSERT_ROW, [_row(corpus, w) for w in writes])
                lsn = await wal_position_on(conn)
        except psycopg.errors.ProgramLimitExceeded as exc:  # rolled back: nothing written
            raise await self._over_limit([it for w in writes for it in w.items], exc) from None
        self.spaces_changed.set()
        if model is not None and corpus.model is None:
            self._cache.pop(corpus.name, None)
        return Written(sum(len(w.items) for w in writes), lsn)

    async def delete_documents(self, corpus: Corpus, ids: Sequence[str]
                               ) -> tuple[list[str], int, str]:
        """Remove the documents with all their chunks (registered or not), in one
        transaction: (the ids that were there, chunks removed, the WAL position)."""
        unregistered = await self.stored_documents(corpus, ids)
        async with self.write_connection() as conn:
            async with conn.transaction():
                cur = await conn.execute(DELETE_ROWS, {"corpus": corpus.id, "ids": list(ids)})
                found: dict[str, set[str]] = {str(r[0]): set(r[1]) for r in await cur.fetchall()}
                for doc, held in unregistered.items():
                    if held.chunks is None and held.orphans:
                        found.setdefault(doc, set()).update(held.orphans)
                chunk_ids = sorted({i for held in found.values() for i in held})
                cur = await conn.execute(sql.SQL(DELETE_IDS).format(
                    items=tables.items_table(corpus.id)), {"ids": chunk_ids})
                removed = cur.rowcount
            lsn = await wal_position_on(conn)
        self.spaces_changed.set()
        return [i for i in ids if i in found], removed, lsn

    async def get_document(self, corpus: Corpus, doc_id: str) -> StoredDocument:
        """The document with its chunks' texts joined; NotFound naming `id` (with a hint
        when an item has that id)."""
        items = tables.items_table(corpus.id)
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(GET_ROW, {"corpus": corpus.id, "id": doc_id})
            row = await cur.fetchone()
            if row is not None:
                await cur.execute(sql.SQL(CHUNK_ROWS).format(items=items), {"ids": row["chunks"]})
                by_id = {r["id"]: r for r in await cur.fetchall()}
                chunks = [by_id[i] for i in row["chunks"] if i in by_id]
            else:
                await cur.execute(sql.SQL(PARENT_ROWS).format(items=items), {"id": doc_id})
                chunks = sorted(await cur.fetchall(), key=lambda r: _chunk_order(r["id"]))
        if row is None and not chunks:
            raise NotFound(await self._no_document(corpus, doc_id), field="id")
        return _document(corpus, doc_id, row, chunks)

    async def _no_document(self, corpus: Corpus, doc_id: str) -> str:
        message = f"document {doc_id!r} not found in corpus {corpus.name!r}"
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql.SQL("SELECT 1 FROM {} WHERE id = %(id)s").format(
                tables.items_table(corpus.id)), {"id": doc_id})
            if await cur.fetchone() is not None:
                message += (f"; an item has that id (GET /v1/vectors/corpora/{corpus.name}"
                            "/items/<id>)")
        return message

    async def document_hint(self, corpus: Corpus, item_id: str) -> str:
        """For an item id that is not an item: the document of that id, if there is one
        (' ...: a document of 2 chunks: a#0, a#1'), else ''."""
        try:
            doc = await self.get_document(corpus, item_id)
        except NotFound:
            return ""
        shown = ", ".join(doc.chunks[:5]) + (", ..." if len(doc.chunks) > 5 else "")
        return (f"; {item_id!r} is a document of {len(doc.chunks)} chunk"
                f"{'s' if len(doc.chunks) != 1 else ''}: {shown} "
                f"(GET /v1/corpora/{corpus.name}/documents/<id>)")

    async def list_documents(self, corpus: Corpus, prefix: str, after: str, limit: int
                             ) -> list[DocumentRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(LIST_ROWS, {"corpus": corpus.id, "prefix": like_prefix(prefix),
                                          "after": after, "limit": limit})
            return [DocumentRow(**r) for r in await cur.fetchall()]

    async def document_counts(self, conn: Conn, corpus_id: int | None = None
                              ) -> dict[int, int]:
        """Documents registered per corpus id (of one corpus, or of all)."""
        cur = await conn.execute(COUNTS, {"corpus": corpus_id})
        return {int(r[0]): int(r[1]) for r in await cur.fetchall()}


def _row(corpus: Corpus, w: DocumentWrite) -> dict[str, Any]:
    return {"corpus": corpus.id, "id": w.id, "chunks": w.chunks, "title": w.title,
            "language": w.language, "tags": w.tags, "metadata": Jsonb(w.metadata),
            "hash": w.content_hash}


def _chunk_order(item_id: str) -> tuple[int, str]:
    """Chunks in their order: by the number after `#`, else by id."""
    n = item_id.rsplit("#", 1)[-1] if document_of(item_id) is not None else ""
    return (int(n), item_id) if n.isdigit() else (-1, item_id)


def _document(corpus: Corpus, doc_id: str, row: dict[str, Any] | None,
              chunks: list[dict[str, Any]]) -> StoredDocument:
    first = chunks[0] if chunks else None
    meta = dict(row["metadata"]) if row is not None else {
        k: v for k, v in ((first or {}).get("metadata") or {}).items() if k != "parent_id"}
    updated = max((c["updated_at"] for c in chunks), default=None)
    when: datetime = updated or (row["updated_at"] if row is not None else datetime.now())
    return StoredDocument(
        id=doc_id, corpus=corpus.name,
        title=row["title"] if row is not None else (first or {}).get("title"),
        text="\n\n".join(c["text"] for c in chunks),
        language=(first or {}).get("language") or (row or {}).get("language") or "",
        tags=list((row or first or {}).get("tags") or []), metadata=meta,
        chunks=[c["id"] for c in chunks],
        content_hash=row["content_hash"] if row is not None else None,
        created_at=row["created_at"] if row is not None else None, updated_at=when)

