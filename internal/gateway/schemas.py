"""The public API's request and response shapes, as msgspec Structs for /openapi.json.

Requests are described by the very structs the daemons validate them with (imported
from their I/O-free models modules), so the document cannot drift from what is
accepted. The responses are internal.api.responses, the shapes the Python client
(`lakehouse`) decodes too.
"""

from __future__ import annotations

from internal.api.matrixd import (
    AnalyzeRequest,
    MatrixSearchRequest,
    NormalizeRequest,
    RecordRequest,
    RelevanceRequest,
    SearchAutoRequest,
    SmartSearchRequest,
)
from internal.api.responses import (
    AnalyzeResponse,
    Corpus,
    CorpusDeleted,
    CorpusList,
    EmbedResponse,
    ErrorBody,
    Health,
    IdsPage,
    ItemsDeleted,
    MatrixCorpora,
    MatrixSearchResponse,
    ModelsResponse,
    NormalizeResponse,
    Passthrough,
    PlaybookDeleted,
    PlaybookList,
    Ready,
    RecordResponse,
    RelevanceResponse,
    SearchAutoResponse,
    SmartSearchResponse,
    StoredItem,
    SyncRun,
    SyncStatus,
    Upserted,
)
from internal.api.vectord import (
    CreateCorpus,
    DeleteItems,
    MultiSearchRequest,
    MultiSearchResponse,
    SearchRequest,
    SearchResponse,
    SpacesResponse,
    UpsertRequest,
)
from internal.embedd.models import EmbedRequest

__all__ = [
    "AnalyzeRequest",
    "AnalyzeResponse",
    "Corpus",
    "CorpusDeleted",
    "CorpusList",
    "CreateCorpus",
    "DeleteItems",
    "EmbedRequest",
    "EmbedResponse",
    "ErrorBody",
    "Health",
    "IdsPage",
    "ItemsDeleted",
    "MatrixCorpora",
    "MatrixSearchRequest",
    "MatrixSearchResponse",
    "ModelsResponse",
    "MultiSearchRequest",
    "MultiSearchResponse",
    "NormalizeRequest",
    "NormalizeResponse",
    "Passthrough",
    "PlaybookDeleted",
    "PlaybookList",
    "Ready",
    "RecordRequest",
    "RecordResponse",
    "RelevanceRequest",
    "RelevanceResponse",
    "SearchAutoRequest",
    "SearchAutoResponse",
    "SearchRequest",
    "SearchResponse",
    "SmartSearchRequest",
    "SmartSearchResponse",
    "SpacesResponse",
    "StoredItem",
    "SyncRun",
    "SyncStatus",
    "UpsertRequest",
    "Upserted",
]
