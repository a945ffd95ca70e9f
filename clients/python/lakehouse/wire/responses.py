"""The public routes' response shapes (docs/API.md), for /openapi.json and the Python client.

The daemons build these answers as dicts; the structs here describe them for the
gateway's document and decode them in `lakehouse`. They are open (unknown fields are
ignored), so a daemon may add a field before it is described here; a field described
here but absent from an answer takes its default.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from lakehouse.wire.ranker import RankerUse
from lakehouse.wire.selection import CorpusStatus as CorpusStatus  # beside its weighing
from lakehouse.wire.shapes import Hit, Precision


class ErrorDetail(msgspec.Struct, omit_defaults=True):  # `field` absent unless one is at fault
    code: str
    message: str
    field: str | None = None


class ErrorBody(msgspec.Struct):
    """Every daemon's error answer (internal.common.web.error_body)."""

    error: ErrorDetail
    request_id: str


class ErrorAnswer(msgspec.Struct):
    """An error answer as a client reads it (the daemons' clients and the public one):
    ErrorBody, its request id optional (the client takes X-Request-ID when it is absent)."""

    error: ErrorDetail
    request_id: str | None = None


class Health(msgspec.Struct):
    status: str


class Component(msgspec.Struct):
    status: Literal["ok", "unavailable", "not_ready"]
    address: str | None = None
    detail: Any = None


class Ready(msgspec.Struct):
    status: Literal["ok", "degraded"]
    components: dict[str, Component]


# ---- embedd ----------------------------------------------------------------------------------

class EmbedResponse(msgspec.Struct):
    model: str
    dim: int
    vectors: list[list[float]]
    truncated: list[int]


class ModelInfo(msgspec.Struct, omit_defaults=True):  # `superseded_by` absent unless set
    id: str
    backend: str
    dim: int | None  # a remote model's dimension is known after its first answer
    # The model whose vectors replace this one's: corpora of this model are re-embedded
    # with it by the stack (served meanwhile, for them).
    superseded_by: str | None = None
    # ISO 639-1 codes of the languages the model's vectors are trained for (absent: not
    # known, as for a remote model).
    languages: list[str] | None = None


class ModelsResponse(msgspec.Struct):
    default: str
    models: list[ModelInfo]


# ---- vectord ---------------------------------------------------------------------------------

class Reembedding(msgspec.Struct):
    """A re-embedding under way: the model and dimension the corpus moves to, how many of
    its items have their new vector, the last error (the job goes on after one)."""

    model: str
    dim: int
    done: int
    total: int
    state: Literal["running"] = "running"
    error: str | None = None


class Conversion(msgspec.Struct):
    """A conversion under way (POST .../convert): the precision the corpus moves to, how
    many of its items are copied, the last error (the job goes on after one)."""

    precision: Precision
    done: int
    total: int
    state: Literal["copying", "indexing"] = "copying"
    error: str | None = None


class ConvertStarted(Conversion, kw_only=True):
    """POST /v1/vectors/corpora/{name}/convert (202)."""

    corpus: str


class IndexSettings(msgspec.Struct):
    """A corpus's vector index: its HNSW graph's `m` and `ef_construction`, the
    `ef_search` its searches use unless they name one, and `exact_scan_rows`: a filtered
    search whose filter matches at most this many items scans them exactly instead of
    walking the graph (never fewer than k hits, recall 1)."""

    m: int
    ef_construction: int
    ef_search: int
    exact_scan_rows: int


class Reindexing(msgspec.Struct):
    """A rebuild of the corpus's graph under way (POST .../index/settings changed `m` or
    `ef_construction`): searches use the old graph until the new one replaces it."""

    m: int
    ef_construction: int
    state: Literal["building"] = "building"
    error: str | None = None


class IndexSettingsChanged(msgspec.Struct, omit_defaults=True):
    """POST /v1/vectors/corpora/{name}/index/settings: the settings now in force (202 and
    `reindex` when the graph is rebuilt in the background; 200 otherwise)."""

    corpus: str
    index: IndexSettings
    reindex: Reindexing | None = None


class Corpus(msgspec.Struct, omit_defaults=True):  # `reembed` absent unless one runs
    name: str
    dim: int
    metric: Literal["cosine", "l2", "ip"]
    language: str
    model: str | None
    count: int
    created_at: datetime
    precision: Precision  # how its vectors and their index are stored
    reembed: Reembedding | None = None  # only while one runs
    conversion: Conversion | None = None  # only while one runs
    index: IndexSettings | None = None  # its vector index's settings
    reindex: Reindexing | None = None  # only while its graph is rebuilt
    description: str | None = None  # what it is about, in its owner's words (when given)


class ReembedStarted(Reembedding, kw_only=True):
    """POST /v1/vectors/corpora/{name}/reembed (202)."""

    corpus: str


class CorpusList(msgspec.Struct):
    corpora: list[Corpus]


class CorpusDeleted(msgspec.Struct):
    deleted: str


class IndexBuilt(msgspec.Struct):
    """POST /v1/vectors/corpora/{name}/index: the vector index built (or there already)."""

    corpus: str
    index: str  # "hnsw"
    seconds: float


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
    updated_at: datetime
    corpus: str = ""
    created_at: datetime | None = None


class ItemsDeleted(msgspec.Struct):
    deleted: int


class IdRow(msgspec.Struct):
    id: str
    content_hash: str
    updated_at: datetime
    title: str | None = None  # what a listing shows beside the id (the console's browse)


class IdsPage(msgspec.Struct):
    items: list[IdRow]
    next_after: str | None


# ---- matrixd: search -------------------------------------------------------------------------

class HitRelevance(msgspec.Struct):
    """A hit's `relevance` when the relevance filter ran."""

    score: float
    signals: dict[str, float]


class DroppedHit(msgspec.Struct):
    """A hit the relevance filter dropped (the answer's `relevance.dropped`)."""

    corpus: str
    id: str
    score: float
    signals: dict[str, float]


class RelevanceSummary(msgspec.Struct):
    """The answer's `relevance`: the filter's threshold, how many hits it kept, the dropped."""

    threshold: float
    kept: int
    dropped: list[DroppedHit]


class DowngradeSummary(msgspec.Struct):
    """The answer's `downgrade`: the gate's thresholds (0 is off) and how many it moved."""

    max_distance: float
    min_score: float
    max_age_days: float
    disputed: bool
    downgraded: int


class MatrixCorpus(msgspec.Struct):
    name: str
    count: int
    dim: int
    model: str | None
    metric: str = "cosine"
    language: str = ""


class MatrixCorpora(msgspec.Struct):
    corpora: list[MatrixCorpus]


class MatrixHit(Hit):
    """vectord's hit plus matrixd's ranking: global and per-corpus rank, the playbook
    boost, and the marks of the downgrade gate, relevance filter and smart search."""

    rank: int = 0
    corpus_rank: int = 0
    boost_factor: float = 1.0
    original_distance: float | None = None
    original_merge_score: float | None = None
    from_playbook: bool = False  # set on every hit when use_playbook is
    # The downgrade gate's reasons (weak, stale, disputed), on every hit when it is on.
    downgraded: list[str] = msgspec.field(default_factory=list)
    relevance: HitRelevance | None = None  # when the relevance filter ran
    context_score: float | None = None  # smart search and search_auto: judged with neighbours
    # Smart search: the ids of the plan's sub-queries that found the hit.
    sub_queries: list[int] = msgspec.field(default_factory=list)
    # The learned ranker's score when it ordered the hits (the answer's `ranker`), and with
    # `explain` its largest contributions (the boost's part, the trees' mean, the features').
    ranker_score: float | None = None
    ranker_contributions: dict[str, float] | None = None


class FailedCorpus(msgspec.Struct):
    corpus: str
    error: str
    status: int = 502
    code: str = "upstream_error"


class SkippedCorpus(msgspec.Struct):
    """A corpus searched without its vector branch: no query vector of its model."""

    corpus: str
    reason: str
    searched: Literal["lexical", "none"]  # hybrid: lexical only; vector mode: nothing


class PlaybookSummary(msgspec.Struct):
    corpus: str
    entries: int
    boosted: int = 0
    demoted: int = 0
    included: int = 0
    recalled: int = 0
    missing: int = 0
    ms: float | None = None
    # "lexical": the query was not embedded (keyword, lexical, or embedd down) and the
    # entries were matched by the words of their recorded question.
    match: str = "vector"


class MatrixSearchResponse(msgspec.Struct):
    hits: list[MatrixHit]
    mode: str = ""
    requested_mode: str = ""
    k: int = 0
    corpora: list[CorpusStatus] = []
    failed_corpora: list[FailedCorpus] = []
    skipped_corpora: list[SkippedCorpus] = []
    degraded: list[str] = []
    playbook_boosted: int = 0
    playbook: PlaybookSummary | None = None
    downgrade: DowngradeSummary | None = None  # when the downgrade gate is on
    relevance: RelevanceSummary | None = None  # when the relevance filter ran
    embed_ms: float | None = None
    took_ms: float = 0.0
    # Value counts per facet, when `facets` was asked (internal.vectord.shaping.shaped).
    facets: dict[str, dict[str, int]] | None = None
    # With `use_playbook`, when the playbook has a model: the model that ordered the hits,
    # or why the boost alone did.
    ranker: RankerUse | None = None
    # The question with its words no searched corpus holds corrected (a typo), when some
    # were: what the lexical layer searched besides them.
    did_you_mean: str | None = None


# ---- matrixd: query intelligence -------------------------------------------------------------

class AnalyzedEntity(msgspec.Struct):
    name: str
    type: Literal["person", "location", "organization", "unknown"]


class TemporalRange(msgspec.Struct, omit_defaults=True):  # a part not known is absent
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


class SmartSearchResponse(MatrixSearchResponse, kw_only=True):
    """The search answer of a planned search, with its analysis, plan and iterations."""

    analysis: AnalyzeResponse | None = None
    plan: dict[str, Any] = {}
    iterations: list[dict[str, Any]] = []
    stopped: str = ""  # adequate | max_iterations | no_new_queries
    searches: int = 0


class SearchAutoResponse(MatrixSearchResponse, kw_only=True):
    """The chosen strategy's answer, with why it was chosen and what it was expected to cost."""

    strategy: str  # a search mode (lakehouse.wire.modes) or "smart"
    reason: str
    estimated_ms: float
    estimate_source: str = ""
    budget_ms: float | None = None


# ---- matrixd: feedback -----------------------------------------------------------------------

class RecordResponse(msgspec.Struct):
    playbook_id: str
    playbook_corpus: str = ""
    created: bool = False


class PlaybookEntryRow(msgspec.Struct):
    playbook_id: str
    query_text: str
    answer_id: str
    answer_corpus: str
    score: float
    tags: list[str]
    recorded_at: datetime | None


class PlaybookList(msgspec.Struct):
    playbook_corpus: str
    entries: list[PlaybookEntryRow]


class PlaybookDeleted(msgspec.Struct):
    deleted: str
    playbook_corpus: str


class ScoredChunk(msgspec.Struct):
    index: int  # the chunk's position in the request
    text: str
    score: float
    signals: dict[str, float] = {}
    source: str | None = None
    doc_id: str | None = None


class RelevanceFocus(msgspec.Struct):
    """The focus file as scored: its language and the symbols read from it."""

    path: str
    language: str | None
    defined_symbols: list[str]
    imported_symbols: list[str]


class RelevanceResponse(msgspec.Struct):
    threshold: float
    kept: list[ScoredChunk]
    dropped: list[ScoredChunk]
    focus: RelevanceFocus


# ---- syncd -----------------------------------------------------------------------------------

class SyncError(msgspec.Struct):
    path: str  # "." for the whole run
    error: str


class SyncRun(msgspec.Struct):
    added: int
    updated: int
    deleted: int
    unchanged: int
    errors: list[SyncError]
    seconds: float
    pages: int = 0
    chunks: int = 0
    ignored: int = 0
    embedded_pages: int = 0
    embedded_chunks: int = 0
    embed_calls: int = 0
    embed_seconds: float = 0.0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    warnings: list[str] = []  # e.g. a language map's folder that matches no page


class SyncStatus(msgspec.Struct):
    wiki_dir: str
    corpus: str
    interval: float
    running: bool
    runs: int
    last_run: SyncRun | None = None
    last_run_at: datetime | None = None
    last_finished_at: datetime | None = None
    next_run_at: datetime | None = None
