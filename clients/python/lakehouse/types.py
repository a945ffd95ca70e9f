"""The client's typed values: the stack's own wire structs, re-exported, plus `Item`.

Responses decode into the structs of lakehouse.wire (the shapes /openapi.json documents,
which the server builds its answers and requests from too); options such as `Filter`,
`Prf` and `DowngradeOption` are the structs the daemons validate with. Plain dicts work
wherever an option struct does.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from lakehouse.wire.answer import (
    AnswerEvent,
    AnswerFeedbackResponse,
    AnswerResponse,
    Citation,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    GeneratorUse,
    ResetEvent,
    SourcesEvent,
)
from lakehouse.wire.ranker import RankerModel, RankerStatus, RankerTraining, RankerUse
from lakehouse.wire.responses import (
    AnalyzedEntity,
    AnalyzeResponse,
    Conversion,
    ConvertStarted,
    Corpus,
    CorpusStatus,
    DowngradeSummary,
    DroppedHit,
    EmbedResponse,
    FailedCorpus,
    HitRelevance,
    IdRow,
    MatrixHit,
    MatrixSearchResponse,
    ModelInfo,
    ModelsResponse,
    NormalizedObservation,
    NormalizeResponse,
    PlaybookDeleted,
    PlaybookEntryRow,
    PlaybookList,
    PlaybookSummary,
    Ready,
    RecordResponse,
    Reembedding,
    ReembedStarted,
    RelevanceSummary,
    Resolved,
    SearchAutoResponse,
    SkippedCorpus,
    SmartSearchResponse,
    StoredItem,
    SyncError,
    SyncRun,
    SyncStatus,
    TemporalRange,
)
from lakehouse.wire.shapes import (
    MAX_DIM,
    DateRange,
    DowngradeOption,
    FieldWeights,
    Filter,
    Hit,
    ItemId,
    Label,
    NumberRange,
    ObservationIn,
    Prf,
)
from lakehouse.wire.storage import CorpusStorage, MemoryHeld, StorageStatus, Warmup

__all__ = [
    "AnalyzeResponse",
    "AnalyzedEntity",
    "AnswerEvent",
    "AnswerFeedbackResponse",
    "AnswerResponse",
    "Citation",
    "Conversion",
    "ConvertStarted",
    "Corpus",
    "CorpusStatus",
    "CorpusStorage",
    "DateRange",
    "DeltaEvent",
    "DoneEvent",
    "DowngradeOption",
    "DowngradeSummary",
    "DroppedHit",
    "EmbedResponse",
    "ErrorEvent",
    "FailedCorpus",
    "FieldWeights",
    "Filter",
    "GeneratorUse",
    "Hit",
    "HitRelevance",
    "IdRow",
    "Item",
    "MatrixHit",
    "MatrixSearchResponse",
    "MemoryHeld",
    "ModelInfo",
    "ModelsResponse",
    "NormalizeResponse",
    "NormalizedObservation",
    "NumberRange",
    "ObservationIn",
    "PlaybookDeleted",
    "PlaybookEntryRow",
    "PlaybookList",
    "PlaybookSummary",
    "Prf",
    "RankerModel",
    "RankerStatus",
    "RankerTraining",
    "RankerUse",
    "Ready",
    "RecordResponse",
    "ReembedStarted",
    "Reembedding",
    "RelevanceSummary",
    "ResetEvent",
    "Resolved",
    "SearchAutoResponse",
    "SkippedCorpus",
    "SmartSearchResponse",
    "SourcesEvent",
    "StorageStatus",
    "StoredItem",
    "SyncError",
    "SyncRun",
    "SyncStatus",
    "TemporalRange",
    "Warmup",
]


class Item(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """An item to upsert; with no `vector`, the stack embeds its title and text.

    The wire item (the server's internal.api.vectord.Item) without the vector requirement: the
    client fills the vector in before the item is sent.
    """

    id: ItemId
    text: str
    title: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    language: Label | None = None
    vector: Annotated[list[float], Meta(min_length=1, max_length=MAX_DIM)] | None = None
