"""A document as the items the service stores (no I/O): its chunks (internal.ingest.chunks),
each with the document's title, tags, language and metadata plus `parent_id`, the
document's id. vectord writes them; a writer that can see the stored content hashes
(the wiki sync) computes the same ones to know which documents changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from internal.common import language as lang
from internal.common.errors import InvalidArgument
from internal.common.hashing import content_hash
from internal.ingest.chunks import Piece, chunk_id, pieces, read_as
from lakehouse.wire.documents import (
    DEFAULT_CHUNK_CHARS,
    Chunking,
    DocumentIn,
)

PARENT = "parent_id"  # the metadata key naming an item's document (group_by "parent" reads it)
MODEL_SAMPLE = 64  # documents read for the model of the corpus a request creates


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


def documents_languages(docs: Sequence[DocumentIn]) -> list[str]:
    """ISO 639-1 codes of the documents' main languages (lang.main_languages), for the
    model of a corpus they create (lakehouse.wire.models.model_for): each document's
    `language` when told, else lingua's verdict on its text; at most MODEL_SAMPLE
    documents, spread over the list, are read (CPU-bound: call it in a thread)."""
    counts: Counter[str] = Counter()
    for doc in docs[::max(1, len(docs) // MODEL_SAMPLE)][:MODEL_SAMPLE]:
        told = None
        if doc.language:
            try:
                told = lang.normalize_language(doc.language, "language")
            except InvalidArgument:
                told = None  # refused with its field when the request is checked
        seen = told or lang.judge(f"{doc.title or ''}\n{doc.text}").language
        if seen and seen != lang.SIMPLE:
            counts[seen] += 1
    return lang.main_languages(counts)
