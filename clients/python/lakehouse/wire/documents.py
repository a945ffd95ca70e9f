"""Documents and tasks on the wire (I/O-free): what a caller sends to add documents as
text, and what the service answers about them and about the tasks that write them.

A document is text the service chunks, embeds (with the corpus's model) and stores; its
chunks are the corpus's items, each carrying the document's id as `metadata.parent_id`
and in search hits as `document_id`. Writes of documents are tasks, run in order per
corpus (Meilisearch's tasks are the model): enqueued, processing, succeeded or failed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from lakehouse.wire.shapes import MAX_ID_BYTES, Label, Vector

# The wiki sync's chunk size (README: "[sync] chunk_chars, 2,000 characters").
DEFAULT_CHUNK_CHARS = 2000
MIN_CHUNK_CHARS = 200
MAX_CHUNK_CHARS = 20_000  # a chunk's text-search vector stays far below PostgreSQL's 1 MB
MAX_DOCUMENTS = 10_000  # documents (or ids) per request
# A document id leaves room for its chunks' `#<n>` within an item id's 512 bytes.
MAX_DOCUMENT_ID_BYTES = MAX_ID_BYTES - 12
MAX_TASK_ERRORS = 1000  # errors a task keeps (its counts say how many documents failed)

Chunking = Literal["sections", "none"]
TaskState = Literal["enqueued", "processing", "succeeded", "failed"]
TaskKind = Literal["documents_add", "documents_delete"]
TASK_STATES: tuple[str, ...] = ("enqueued", "processing", "succeeded", "failed")
TASK_KINDS: tuple[str, ...] = ("documents_add", "documents_delete")
DocumentId = Annotated[str, Meta(min_length=1, max_length=MAX_DOCUMENT_ID_BYTES,
                                 description=f"at most {MAX_DOCUMENT_ID_BYTES} bytes of "
                                             "UTF-8, no NUL; not '.' or '..'")]


class ChunkIn(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One chunk of a document its writer cut itself: its text and metadata of its own
    (laid over the document's)."""

    text: str
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class DocumentIn(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One document to add: its id (yours), its text (markdown or plain) and what an item
    holds besides. `language` absent: detected (an `auto` corpus) or the corpus's.
    `vector`: your own vector for it, only with chunking `none` (one chunk). `chunks`: the
    document already cut (stored in this order, whatever the chunking)."""

    id: DocumentId
    text: str = ""
    title: str | None = None
    language: Label | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    vector: Vector | None = None
    chunks: Annotated[list[ChunkIn], Meta(max_length=10_000)] | None = None


class AddDocuments(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """POST /v1/corpora/{name}/documents. `chunking`: `sections` (a chunk per markdown
    section, the wiki sync's rules) or `none` (the text as one item under the document's
    id); `chunk_chars`: the longest section kept whole; `model`: a new corpus's."""

    documents: Annotated[list[DocumentIn], Meta(max_length=MAX_DOCUMENTS)]
    chunking: Chunking = "sections"
    chunk_chars: Annotated[int, Meta(ge=MIN_CHUNK_CHARS, le=MAX_CHUNK_CHARS)] = DEFAULT_CHUNK_CHARS
    # The embedding model of the corpus this request creates (absent: the model embedd
    # lists for the documents' languages, lakehouse.wire.models.model_for); a corpus that
    # exists on another model is a 409 `model_mismatch` (move it with a re-embedding).
    model: Annotated[str, Meta(min_length=1, max_length=200)] | None = None


class DeleteDocuments(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/corpora/{name}/documents/delete: documents by id, with all their chunks."""

    ids: Annotated[list[str], Meta(max_length=MAX_DOCUMENTS)]


class TaskCounts(msgspec.Struct):
    """What a task did so far: documents received, added (new), updated, unchanged,
    deleted, not found (a delete of an id not there), failed; chunks written and
    embedded, stale chunks removed, calls to the embedder."""

    received: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    not_found: int = 0
    failed: int = 0
    chunks: int = 0
    embedded: int = 0
    stale: int = 0
    embed_calls: int = 0


class TaskError(msgspec.Struct, omit_defaults=True):
    """A document the task could not write, and why (the error body's code and message;
    `field` within the document when one is at fault)."""

    document_id: str
    code: str
    message: str
    field: str | None = None


class TaskTimings(msgspec.Struct):
    """Milliseconds: enqueued before it started, chunking and comparing, embedding, writing,
    and from start to end."""

    waited_ms: float = 0.0
    chunk_ms: float = 0.0
    embed_ms: float = 0.0
    write_ms: float = 0.0
    total_ms: float = 0.0


class Task(msgspec.Struct):
    """GET /v1/tasks/{id}; the 202 of a write of documents. `error`: why the task as a
    whole failed, or (while it is enqueued or processing) the trouble it waits out, e.g.
    the embedder down. `succeeded`: every document went in; `failed`: the task stopped,
    or some documents were refused (`errors`, `counts.failed`; the others went in)."""

    id: int
    corpus: str
    kind: TaskKind
    state: TaskState
    counts: TaskCounts
    errors: list[TaskError]
    error: str | None
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    timings: TaskTimings

    @property
    def done(self) -> bool:
        return self.state in ("succeeded", "failed")


class TaskList(msgspec.Struct):
    """GET /v1/tasks: newest first; `next`: the `from` of the next page (None: the last)."""

    tasks: list[Task]
    next: int | None


class StoredDocument(msgspec.Struct):
    """GET /v1/corpora/{name}/documents/{id}: the document as stored. `text`: its chunks'
    texts joined by a blank line; `language` as its chunks are stored; `metadata` as it
    was given; `chunks`: the ids of its items, in order."""

    id: str
    corpus: str
    title: str | None
    text: str
    language: str
    tags: list[str]
    metadata: dict[str, Any]
    chunks: list[str]
    content_hash: str | None
    created_at: datetime | None
    updated_at: datetime


class DocumentRow(msgspec.Struct):
    """A document in a listing: its content hash (`document_hash` of the document as sent
    with its chunking: a writer skips what is stored), its chunks, when it last changed."""

    id: str
    content_hash: str
    chunks: int
    title: str | None
    updated_at: datetime


class DocumentsPage(msgspec.Struct):
    """GET /v1/corpora/{name}/documents?after=&limit=&prefix=: keyset pages by id."""

    documents: list[DocumentRow]
    next_after: str | None


_encoder = msgspec.json.Encoder(order="sorted")


def document_hash(doc: DocumentIn, chunking: Chunking = "sections",
                  chunk_chars: int = DEFAULT_CHUNK_CHARS) -> str:
    """sha256 over what a document says and how it is cut (not its vector): equal hash,
    equal stored chunks. The listing's `content_hash`."""
    cut = "none" if chunking == "none" else f"sections:{chunk_chars}"
    given = None if doc.chunks is None else [[c.text, c.metadata] for c in doc.chunks]
    payload = _encoder.encode([doc.title or "", doc.text, list(doc.tags), doc.metadata,
                               doc.language or "", cut, given])
    return hashlib.sha256(payload).hexdigest()
