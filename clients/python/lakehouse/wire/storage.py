"""The responses about storage and memory (GET /v1/vectors/storage): what each corpus
takes on disk, whether its vector index fits in shared_buffers, the memory the
processes hold and the warm-up after a start."""

from __future__ import annotations

from typing import Literal

import msgspec

from lakehouse.wire.responses import Conversion, Reembedding
from lakehouse.wire.shapes import Precision


class CorpusStorage(msgspec.Struct):
    """One corpus's share of the database (GET /v1/vectors/storage), in bytes on disk."""

    name: str
    precision: Precision
    rows: int
    table_bytes: int  # the items heap with its TOAST: vectors, texts, metadata
    index_bytes: int  # its vector index (the HNSW graph)
    other_index_bytes: int  # its key, metadata, updated_at and trigram indexes
    lexical_bytes: int  # its BM25 postings and statistics, with their keys
    index_fits_shared_buffers: bool  # index_bytes <= PostgreSQL's shared_buffers
    reembed: Reembedding | None = None
    conversion: Conversion | None = None


class MemoryHeld(msgspec.Struct):
    """Memory held now: vectord's PSS; PostgreSQL's processes' own pages plus its shared
    memory's resident pages once (None when the server is not on vectord's machine)."""

    vectord_bytes: int
    postgres_bytes: int | None
    postgres_counted: str  # how postgres_bytes was counted, or why it is None


class Warmup(msgspec.Struct):
    """Reading the corpora's indexes and tables back into memory after a start or a
    failover (searches answer meanwhile)."""

    state: Literal["waiting", "warming", "done", "failed"]
    method: Literal["files", "queries", ""] = ""  # files: read straight from the data directory
    done_bytes: int = 0
    budget_bytes: int = 0
    seconds: float = 0.0
    corpora: int = 0  # corpora warmed (or being warmed)
    error: str | None = None


class StorageStatus(msgspec.Struct):
    """GET /v1/vectors/storage: what the corpora take and whether their indexes fit."""

    shared_buffers_bytes: int
    effective_cache_size_bytes: int
    memory: MemoryHeld
    spaces_bytes: int  # the shared indexes of embedding spaces (tables and graphs)
    corpora: list[CorpusStorage]
    warmup: Warmup
