"""The public API's request and response shapes, as msgspec Structs for /openapi.json.

Requests are described by the very structs the daemons validate them with (imported
from their I/O-free models modules), so the document cannot drift from what is
accepted. The response shapes that no daemon declares as a struct are written here,
after docs/API.md; they are open (unknown fields allowed) so a daemon may add fields.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from internal.api.matrixd import (
    AnalyzeRequest,
    MatrixSearchRequest,
    NormalizeRequest,
    RecordRequest,
    RelevanceRequest,
    SearchAutoRequest,
    SmartSearchRequest,
)
from internal.api.vectord import (
    CreateCorpus,
    DeleteItems,
    Hit,
    MultiSearchRequest,
    MultiSearchResponse,
    SearchRequest,
    SearchResponse,
    UpsertRequest,
)
from internal.embedd.models import EmbedRequest

__all__ = [
    "AnalyzeRequest",
    "CreateCorpus",
    "DeleteItems",
    "EmbedRequest",
    "Hit",
    "MatrixSearchRequest",
    "MultiSearchRequest",
    "MultiSearchResponse",
    "NormalizeRequest",
    "RecordRequest",
    "RelevanceRequest",
    "SearchAutoRequest",
    "SearchRequest",
    "SearchResponse",
    "SmartSearchRequest",
    "UpsertRequest",
]


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
class EmbedResponse(msgspec.Struct):
    model: str
    dim: int
    vectors: list[list[float]]
    truncated: list[int]


class ModelInfo(msgspec.Struct):
    id: str
    backend: str
    dim: int | None  # a remote model's dimension is known after its first answer


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


class CorpusList(msgspec.Struct):
    corpora: list[Corpus]


class CorpusDeleted(msgspec.Struct):
    deleted: str


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


class ItemsDeleted(msgspec.Struct):
    deleted: int


class IdRow(msgspec.Struct):
    id: str
    content_hash: str
    updated_at: str


class IdsPage(msgspec.Struct):
    items: list[IdRow]
    next_after: str | None


# matrixd
class MatrixCorpus(msgspec.Struct):
    name: str
    count: int
    dim: int
    model: str | None


class MatrixCorpora(msgspec.Struct):
    corpora: list[MatrixCorpus]


class FailedCorpus(msgspec.Struct):
    corpus: str
    error: str


class MatrixSearchResponse(msgspec.Struct):
    hits: list[Hit]
    failed_corpora: list[FailedCorpus] = []
    degraded: list[str] = []
    playbook_boosted: int = 0


# query intelligence (issue 17)

class AnalyzedEntity(msgspec.Struct):
    name: str
    type: Literal["person", "location", "organization", "unknown"]


class TemporalRange(msgspec.Struct):
    start: str | None = None
    end: str | None = None
    relative: str | None = None


class AnalyzeResponse(msgspec.Struct):
    query: str
    entities: list[AnalyzedEntity]
    persons: list[str]
    locations: list[str]
    organizations: list[str]
    temporal_range: TemporalRange | None
    question_type: Literal["factual", "temporal", "comparative", "aggregation", "multi-hop",
                           "conceptual"]
    complexity: Literal["low", "medium", "high"]
    confidence: float
    required_info_types: list[str]
    sub_queries: list[str]


class Resolved(msgspec.Struct):
    span: str
    replacement: str
    kind: Literal["coreference", "temporal"]


class NormalizedObservation(msgspec.Struct):
    text: str
    original: str
    keywords: list[str]
    resolved: list[Resolved]
    dates: list[str] = []


class NormalizeResponse(msgspec.Struct):
    observations: list[NormalizedObservation]


class SmartSearchResponse(msgspec.Struct):
    hits: list[Hit]
    plan: dict[str, Any]
    iterations: list[dict[str, Any]]
    analysis: dict[str, Any] = {}
    stopped: str = ""
    failed_corpora: list[FailedCorpus] = []
    degraded: list[str] = []


class SearchAutoResponse(msgspec.Struct):
    hits: list[Hit]
    strategy: Literal["keyword", "lexical", "vector", "hybrid", "smart"]
    reason: str
    estimated_ms: float
    took_ms: float
    estimate_source: str = ""
    failed_corpora: list[FailedCorpus] = []
    degraded: list[str] = []


class RecordResponse(msgspec.Struct):
    playbook_id: str


class PlaybookEntryRow(msgspec.Struct):
    playbook_id: str
    query_text: str
    answer_id: str
    answer_corpus: str
    score: float
    tags: list[str]
    recorded_at: str | None


class PlaybookList(msgspec.Struct):
    playbook_corpus: str
    entries: list[PlaybookEntryRow]


class PlaybookDeleted(msgspec.Struct):
    deleted: str
    playbook_corpus: str


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
