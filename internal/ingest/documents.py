"""A document as the items the service stores (no I/O): its chunks (internal.ingest.chunks),
each with the document's title, tags, language and metadata plus `parent_id`, the
document's id. vectord writes them; a writer that can see the stored content hashes
(the wiki sync) computes the same ones to know which documents changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from internal.common.hashing import content_hash
from internal.ingest.chunks import Piece, chunk_id, pieces, read_as
from lakehouse.wire.documents import (
    DEFAULT_CHUNK_CHARS,
    Chunking,
    DocumentIn,
)

PARENT = "parent_id"  # the metadata key naming an item's document (group_by "parent" reads it)


@dataclass(frozen=True)
class ChunkItem:
    """One stored chunk of a document, without its vector."""

    id: str
    text: str
    title: str | None
    tags: list[str]
    metadata: dict[str, Any]
    language: str | None  # as the document gave it (None: the service decides)
    embed_text: str
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        # vectord's content_hash over the item as sent (its language as given).
        object.__setattr__(self, "hash", content_hash(self.title, self.text, self.tags,
                                                      self.metadata, self.language))


def chunk_items(doc: DocumentIn, chunking: Chunking = "sections",
                chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[ChunkItem]:
    """The document's items in chunk order. Its own `chunks` (cut by its writer) are
    stored as given, chunk n under `<id>#<n>`, each with the document's metadata under its
    own."""
    base = {**doc.metadata, PARENT: doc.id}
    if doc.chunks is not None:
        cut = [(Piece(chunk_id(doc.id, n), c.text, read_as(doc.title, c.text, n)),
                {**doc.metadata, **c.metadata, PARENT: doc.id})
               for n, c in enumerate(doc.chunks)]
    else:
        cut = [(p, base) for p in pieces(doc.id, doc.title, doc.text, chunking, chunk_chars)]
    return [ChunkItem(id=p.id, text=p.text, title=doc.title, tags=list(doc.tags),
                      metadata=meta, language=doc.language or None, embed_text=p.embed_text)
            for p, meta in cut]


def blank(doc: DocumentIn) -> bool:
    """Nothing to embed: no text, no title and no chunk with text."""
    if doc.chunks is not None:
        return not any(c.text.strip() for c in doc.chunks)
    return not doc.text.strip() and not (doc.title or "").strip()
