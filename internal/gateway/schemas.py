"""The public API's request and response shapes, as msgspec Structs for /openapi.json.

These mirror docs/API.md (the contract); the daemons validate the real requests.
Response structs are open (unknown fields allowed) so a daemon may add fields.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Mode = Literal["vector", "keyword", "lexical", "hybrid"]


class ErrorDetail(msgspec.Struct):
    code: str
    message: str
    field: str | None = None


class ErrorBody(msgspec.Struct):
    error: ErrorDetail
    request_id: str


class Health(msgspec.Struct):
    status: str


class Component(msgspec.Struct):
    status: Literal["ok", "unavailable", "not_ready"]
    address: str | None = None
    detail: Any = None


class Ready(msgspec.Struct):
    status: Literal["ok", "degraded"]
    components: dict[str, Component]


# embedd
class EmbedRequest(msgspec.Struct, forbid_unknown_fields=True):
    texts: list[str]
    model: str | None = None
    input_type: Literal["query", "document"] | None = None


class EmbedResponse(msgspec.Struct):
    model: str
    dim: int
    vectors: list[list[float]]
    truncated: list[int]


class ModelInfo(msgspec.Struct):
    id: str
    backend: str
    dim: int


class ModelsResponse(msgspec.Struct):
    default: str
    models: list[ModelInfo]


# vectord
class Corpus(msgspec.Struct):
    name: str
    dim: int
    metric: Literal["cosine", "l2", "ip"]
    language: str
    model: str | None
    count: int
    created_at: str


class CreateCorpus(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    dim: int
    metric: Literal["cosine", "l2", "ip"] = "cosine"
    language: str = "english"
    model: str | None = None


class CorpusList(msgspec.Struct):
    corpora: list[Corpus]


class CorpusDeleted(msgspec.Struct):
    deleted: str


class Item(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    vector: list[float]
    text: str
    title: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    language: str | None = None


class UpsertRequest(msgspec.Struct, forbid_unknown_fields=True):
    items: list[Item]
    model: str | None = None


class Upserted(msgspec.Struct):
    upserted: int


class StoredItem(msgspec.Struct):
    id: str
    vector: list[float]
    text: str
    title: str | None
    tags: list[str]
    metadata: dict[str, Any]
    language: str | None
    content_hash: str
    updated_at: str


class DeleteItems(msgspec.Struct, forbid_unknown_fields=True):
    ids: list[str]


class ItemsDeleted(msgspec.Struct):
    deleted: int


class IdRow(msgspec.Struct):
    id: str
    content_hash: str
    updated_at: str


class IdsPage(msgspec.Struct):
    items: list[IdRow]
    next_after: str | None


class Filter(msgspec.Struct):
    metadata: dict[str, Any] | None = None
    id_prefix: str | None = None
    updated_after: str | None = None
    updated_before: str | None = None


class SearchRequest(msgspec.Struct):
    mode: Mode
    query_vector: list[float] | None = None
    query_text: str | None = None
    k: int = 10
    ef_search: int | None = None
    language: str | None = None
    filter: Filter | None = None


class Ranks(msgspec.Struct):
    vector: int | None
    lexical: int | None


class BranchScores(msgspec.Struct):
    vector: float | None
    lexical: float | None


class Hit(msgspec.Struct):
    id: str
    corpus: str
    distance: float | None
    score: float | None
    ranks: Ranks
    scores: BranchScores
    text: str
    title: str | None
    tags: list[str]
    metadata: dict[str, Any]
    language: str | None
    updated_at: str


class SearchResponse(msgspec.Struct):
    corpus: str
    mode: Mode
    hits: list[Hit]
    took_ms: float


# matrixd
class MatrixCorpus(msgspec.Struct):
    name: str
    count: int
    dim: int
    model: str | None


class MatrixCorpora(msgspec.Struct):
    corpora: list[MatrixCorpus]


class MatrixSearchRequest(msgspec.Struct):
    corpora: list[str]
    query_text: str | None = None
    query_vector: list[float] | None = None
    k: int = 10
    per_corpus_k: int | None = None
    mode: Mode | None = None
    filter: Filter | None = None
    use_playbook: bool = False
    allow_partial: bool = False
    relevance: dict[str, Any] | None = None


class FailedCorpus(msgspec.Struct):
    corpus: str
    error: str


class MatrixSearchResponse(msgspec.Struct):
    hits: list[Hit]
    failed_corpora: list[FailedCorpus] = []
    degraded: list[str] = []
    playbook_boosted: int = 0


class RecordRequest(msgspec.Struct):
    query_text: str
    answer_id: str
    answer_corpus: str
    score: float
    tags: list[str] | None = None


class RecordResponse(msgspec.Struct):
    playbook_id: str


class Focus(msgspec.Struct):
    path: str
    text: str | None = None
    defined_symbols: list[str] | None = None
    imported_symbols: list[str] | None = None


class Chunk(msgspec.Struct):
    text: str
    source: str | None = None
    doc_id: str | None = None


class RelevanceRequest(msgspec.Struct):
    focus: Focus
    chunks: list[Chunk]
    threshold: float = 0.3


class ScoredChunk(msgspec.Struct):
    text: str
    score: float
    signals: dict[str, float] = {}
    source: str | None = None
    doc_id: str | None = None


class RelevanceResponse(msgspec.Struct):
    kept: list[ScoredChunk]
    dropped: list[ScoredChunk]


# syncd
class SyncError(msgspec.Struct):
    path: str
    error: str


class SyncRun(msgspec.Struct):
    added: int
    updated: int
    deleted: int
    unchanged: int
    errors: list[SyncError]
    seconds: float


class Passthrough(msgspec.Struct):
    """Any JSON object: the daemon's own answer, passed on unchanged."""
