"""The public routes' response shapes: defined once, in the client distribution
(lakehouse.wire.responses), which /openapi.json and the daemons use from here; and the
server's own build of one of them (`RankedHit`)."""

from typing import Any, Generic, TypeVar

import msgspec

from lakehouse.wire.ranker import RankerUse
from lakehouse.wire.responses import (
    AnalyzedEntity as AnalyzedEntity,
)
from lakehouse.wire.responses import (
    AnalyzeResponse as AnalyzeResponse,
)
from lakehouse.wire.responses import (
    Component as Component,
)
from lakehouse.wire.responses import (
    Conversion as Conversion,
)
from lakehouse.wire.responses import (
    ConvertStarted as ConvertStarted,
)
from lakehouse.wire.responses import (
    Corpus as Corpus,
)
from lakehouse.wire.responses import (
    CorpusDeleted as CorpusDeleted,
)
from lakehouse.wire.responses import (
    CorpusList as CorpusList,
)
from lakehouse.wire.responses import (
    CorpusStatus as CorpusStatus,
)
from lakehouse.wire.responses import (
    DowngradeSummary as DowngradeSummary,
)
from lakehouse.wire.responses import (
    DroppedHit as DroppedHit,
)
from lakehouse.wire.responses import (
    EmbedResponse as EmbedResponse,
)
from lakehouse.wire.responses import (
    ErrorAnswer as ErrorAnswer,
)
from lakehouse.wire.responses import (
    ErrorBody as ErrorBody,
)
from lakehouse.wire.responses import (
    ErrorDetail as ErrorDetail,
)
from lakehouse.wire.responses import (
    FailedCorpus as FailedCorpus,
)
from lakehouse.wire.responses import (
    Health as Health,
)
from lakehouse.wire.responses import (
    HitRelevance as HitRelevance,
)
from lakehouse.wire.responses import (
    IdRow as IdRow,
)
from lakehouse.wire.responses import (
    IdsPage as IdsPage,
)
from lakehouse.wire.responses import (
    IndexBuilt as IndexBuilt,
)
from lakehouse.wire.responses import (
    IndexSettings as IndexSettings,
)
from lakehouse.wire.responses import (
    IndexSettingsChanged as IndexSettingsChanged,
)
from lakehouse.wire.responses import (
    ItemsDeleted as ItemsDeleted,
)
from lakehouse.wire.responses import (
    MatrixCorpora as MatrixCorpora,
)
from lakehouse.wire.responses import (
    MatrixCorpus as MatrixCorpus,
)
from lakehouse.wire.responses import (
    MatrixHit as MatrixHit,
)
from lakehouse.wire.responses import (
    MatrixSearchResponse as MatrixSearchResponse,
)
from lakehouse.wire.responses import (
    ModelInfo as ModelInfo,
)
from lakehouse.wire.responses import (
    ModelsResponse as ModelsResponse,
)
from lakehouse.wire.responses import (
    NormalizedObservation as NormalizedObservation,
)
from lakehouse.wire.responses import (
    NormalizeResponse as NormalizeResponse,
)
from lakehouse.wire.responses import (
    PlaybookDeleted as PlaybookDeleted,
)
from lakehouse.wire.responses import (
    PlaybookEntryRow as PlaybookEntryRow,
)
from lakehouse.wire.responses import (
    PlaybookList as PlaybookList,
)
from lakehouse.wire.responses import (
    PlaybookSummary as PlaybookSummary,
)
from lakehouse.wire.responses import (
    Ready as Ready,
)
from lakehouse.wire.responses import (
    RecordResponse as RecordResponse,
)
from lakehouse.wire.responses import (
    Reembedding as Reembedding,
)
from lakehouse.wire.responses import (
    ReembedStarted as ReembedStarted,
)
from lakehouse.wire.responses import (
    Reindexing as Reindexing,
)
from lakehouse.wire.responses import (
    RelevanceFocus as RelevanceFocus,
)
from lakehouse.wire.responses import (
    RelevanceResponse as RelevanceResponse,
)
from lakehouse.wire.responses import (
    RelevanceSummary as RelevanceSummary,
)
from lakehouse.wire.responses import (
    Resolved as Resolved,
)
from lakehouse.wire.responses import (
    ScoredChunk as ScoredChunk,
)
from lakehouse.wire.responses import (
    SearchAutoResponse as SearchAutoResponse,
)
from lakehouse.wire.responses import (
    SkippedCorpus as SkippedCorpus,
)
from lakehouse.wire.responses import (
    SmartSearchResponse as SmartSearchResponse,
)
from lakehouse.wire.responses import (
    StoredItem as StoredItem,
)
from lakehouse.wire.responses import (
    SyncError as SyncError,
)
from lakehouse.wire.responses import (
    SyncRun as SyncRun,
)
from lakehouse.wire.responses import (
    SyncStatus as SyncStatus,
)
from lakehouse.wire.responses import (
    TemporalRange as TemporalRange,
)
from lakehouse.wire.responses import (
    Upserted as Upserted,
)
from lakehouse.wire.selection import CorpusProfile as CorpusProfile
from lakehouse.wire.selection import CorpusSelection as CorpusSelection
from lakehouse.wire.selection import ProfileTerm as ProfileTerm
from lakehouse.wire.selection import SelectionEvidence as SelectionEvidence
from lakehouse.wire.shapes import Hit
from lakehouse.wire.storage import (
    CorpusStorage as CorpusStorage,
)
from lakehouse.wire.storage import (
    MemoryHeld as MemoryHeld,
)
from lakehouse.wire.storage import (
    StorageStatus as StorageStatus,
)
from lakehouse.wire.storage import (
    Warmup as Warmup,
)

# ---- matrixd's hits as it builds them ----------------------------------------------------


class RankedHit(Hit):
    """A hit as matrixd answers it: vectord's `Hit` (decoded straight into this struct)
    with matrixd's annotations. The client decodes it as `MatrixHit`, whose defaults say
    what an absent field means; here a field is UNSET, so absent from the answer, until the
    step that sets it has run. The order is the order they are set in (merge, playbook
    recall, relevance, downgrade, boost, rank), so the answer reads as it always has.
    """

    # Dropped (UNSET) when the playbook marks recall: `from_playbook` says it then.
    included: bool | msgspec.UnsetType = False  # type: ignore[assignment]
    corpus_rank: int = 0
    from_playbook: bool | msgspec.UnsetType = msgspec.UNSET
    relevance: HitRelevance | msgspec.UnsetType = msgspec.UNSET
    downgraded: list[str] | msgspec.UnsetType = msgspec.UNSET
    boost_factor: float = 1.0
    original_distance: float | None = None
    original_merge_score: float | msgspec.UnsetType | None = msgspec.UNSET
    rank: int = 0
    ranker_score: float | msgspec.UnsetType = msgspec.UNSET
    ranker_contributions: dict[str, float] | msgspec.UnsetType = msgspec.UNSET
    # Smart search and search_auto: the score a hit has judged with its neighbours
    # (internal.understanding.context), and the ids of the plan's sub-queries that found it.
    context_score: float | msgspec.UnsetType = msgspec.UNSET
    sub_queries: list[int] | msgspec.UnsetType = msgspec.UNSET


H = TypeVar("H")


class SearchHead(msgspec.Struct, Generic[H], kw_only=True):
    """The keys every matrix search answer (plain, smart, auto) begins with, in order."""

    mode: str
    requested_mode: str
    k: int
    hits: list[H]
    corpora: list[CorpusStatus]
    failed_corpora: list[FailedCorpus]
    skipped_corpora: list[SkippedCorpus]
    degraded: list[str]
    playbook_boosted: int
    embed_ms: float | None


class MatrixAnswer(SearchHead[RankedHit], kw_only=True):
    """POST /v1/matrix/search's answer as matrixd builds it; the client reads it as
    `MatrixSearchResponse`. The fields in the answer's order; those that apply only to
    some searches (the playbook's summary, facets, the downgrade gate, the relevance
    filter) UNSET, so absent, unless they do."""

    took_ms: float
    playbook: PlaybookSummary | msgspec.UnsetType = msgspec.UNSET
    facets: dict[str, dict[str, int]] | msgspec.UnsetType = msgspec.UNSET
    downgrade: DowngradeSummary | msgspec.UnsetType = msgspec.UNSET
    relevance: RelevanceSummary | msgspec.UnsetType = msgspec.UNSET
    ranker: RankerUse | msgspec.UnsetType = msgspec.UNSET
    # The question with its words no searched corpus holds corrected (a typo).
    did_you_mean: str | msgspec.UnsetType = msgspec.UNSET


class SmartAnswer(SearchHead[RankedHit], kw_only=True):
    """POST /v1/matrix/smart_search's answer as matrixd builds it; the client reads it as
    `SmartSearchResponse`. Its hits carry what the fusion of the sub-queries and the
    context smoothing add (`sub_queries`, `context_score`)."""

    analysis: AnalyzeResponse
    plan: dict[str, Any]
    iterations: list[dict[str, Any]]
    stopped: str  # adequate | max_iterations | no_new_queries
    searches: int
    took_ms: float


# search_auto's answer: the chosen search's, then the choice (SearchAutoResponse's keys).
# msgspec structs take fields from one base only, so each kind declares the choice.

class AutoAnswer(MatrixAnswer, kw_only=True):
    """search_auto after a plain search. With context smoothing (hybrid) its hits carry
    `context_score`."""

    strategy: str  # keyword | lexical | vector | hybrid
    reason: str
    estimated_ms: float
    estimate_source: str
    budget_ms: float | None


class SmartAutoAnswer(SmartAnswer, kw_only=True):
    """search_auto after a smart search."""

    strategy: str = "smart"
    reason: str
    estimated_ms: float
    estimate_source: str
    budget_ms: float | None
