"""matrixd's request shapes (I/O-free, so the gateway's /openapi.json can use them too)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from internal.api.vectord import (
    MAX_FACET_SIZE,
    MAX_FACETS,
    MAX_GROUP_SIZE,
    MAX_QUERY_CHARS,
    MAX_RRF_K,
    CorpusName,
    EfSearch,
    FacetSpec,
    FieldPath,
    Filter,
    Highlight,
    ItemId,
    K,
    Label,
    Mode,
    Prf,
    QueryText,
    Recency,
    Vector,
    Weight,
)
from lakehouse.wire.shapes import DowngradeOption as DowngradeOption
from lakehouse.wire.shapes import ObservationIn as ObservationIn


# The relevance filter's input (internal.matrixd.relevance scores it): the focus file
# and the chunks to judge.
class Focus(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    text: str | None = None
    defined_symbols: list[str] | None = None
    imported_symbols: list[str] | None = None


class Chunk(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    source: str | None = None
    doc_id: str | None = None


DEFAULT_RELEVANCE_THRESHOLD = 0.3  # a chunk scoring below it is dropped


# Relevance scores are sums of a handful of signal weights (relevance.WEIGHTS).
Threshold = Annotated[float, Meta(ge=-100, le=100)]


class RelevanceOption(msgspec.Struct, forbid_unknown_fields=True):
    focus: Focus
    threshold: Threshold = DEFAULT_RELEVANCE_THRESHOLD


class MatrixSearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    # None: every corpus except playbook corpora. At most [matrixd] max_corpora (64); k
    # and per_corpus_k at most [matrixd] max_k.
    corpora: Annotated[list[str], Meta(min_length=1, max_length=1000)] | None = None
    query_text: QueryText | None = None
    query_vector: Vector | None = None
    k: K = 10
    per_corpus_k: K | None = None
    mode: Mode | None = None
    # Passed through to vectord unchanged, which validates it (docs/API.md).
    filter: dict[str, Any] | None = None
    language: Label | None = None
    ef_search: EfSearch | None = None
    fusion: Literal["rrf", "weighted", "dbsf"] | None = None
    rrf_k: Annotated[int, Meta(ge=1, le=MAX_RRF_K)] | None = None
    weights: dict[str, Weight] | None = None
    candidates: K | None = None
    prefer: dict[str, Any] | None = None
    prf: dict[str, Any] | None = None  # hybrid: pseudo-relevance feedback (vectord checks it)
    allow_partial: bool = False
    use_playbook: bool = False
    playbook_corpus: CorpusName | None = None
    playbook_top_k: K | None = None
    playbook_max_distance: Annotated[float, Meta(ge=0)] | None = None
    relevance: RelevanceOption | None = None
    downgrade: DowngradeOption | None = None
    # With the learned ranker ordering the hits: each one's largest feature contributions.
    explain: bool = False
    # Tilts a corpus after fusion: merge_score x w, or distance / w in vector mode.
    corpus_weights: dict[str, float] | None = None
    # Shaping the results (vectord's, internal.vectord.shaping.shaped): absent, today's answer.
    highlight: bool | Highlight | None = None
    group_by: FieldPath | None = None
    group_size: Annotated[int, Meta(ge=1, le=MAX_GROUP_SIZE)] | None = None
    facets: Annotated[list[FieldPath | FacetSpec], Meta(max_length=MAX_FACETS)] | None = None
    facet_size: Annotated[int, Meta(ge=1, le=MAX_FACET_SIZE)] | None = None
    diversity: Annotated[float, Meta(ge=0, le=1)] | None = None
    recency: Recency | None = None


class PassedOptions(msgspec.Struct, forbid_unknown_fields=True):
    """MatrixSearchRequest's free-form options as the structs vectord's request holds them:
    matrixd converts them once, in its own check, before it builds that request (a bad one
    is the caller's 400 naming `filter.<key>`, before any corpus is searched)."""

    filter: Filter | None = None
    prefer: Filter | None = None
    prf: Prf | None = None


class RecordRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: Annotated[str, Meta(min_length=1, max_length=MAX_QUERY_CHARS)]
    answer_id: ItemId
    answer_corpus: CorpusName
    score: Annotated[float, Meta(ge=-1, le=1)]  # -1: wrong answer; 1: right
    tags: Annotated[list[Annotated[str, Meta(max_length=256)]], Meta(max_length=64)] = (
        msgspec.field(default_factory=list))
    playbook_corpus: CorpusName | None = None


class RelevanceRequest(msgspec.Struct, forbid_unknown_fields=True):
    focus: Focus
    chunks: list[Chunk]
    threshold: Threshold = DEFAULT_RELEVANCE_THRESHOLD


# ---- query intelligence ---------------------------------------------------------

MAX_OBSERVATIONS = 1000  # a normalize request holds at most this many (413 beyond)


class AnalyzeRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: str
    now: str | None = None  # ISO 8601; relative dates resolve against it (default: now)


class NormalizeRequest(msgspec.Struct, forbid_unknown_fields=True):
    observations: list[ObservationIn]
    context: list[str] = msgspec.field(default_factory=list)


class SearchOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What smart_search and search_auto share: the question, where to look, how many
    hits, and the options given to every search they run (MatrixSearchRequest's
    meaning). Checked in one place (internal.matrixd.smart.check_options): k within
    1..[matrixd] max_k, the corpus names, `now` an ISO instant."""

    query_text: str
    corpora: list[str] | None = None  # absent: every corpus but the playbook
    k: int = 10
    now: str | None = None  # ISO 8601: the instant "yesterday" is read against (default: now)
    filter: dict[str, Any] | None = None
    language: str | None = None
    allow_partial: bool = False
    # Judge a dialogue turn with its neighbours (internal.understanding.context): hits whose
    # metadata names a thread and a position ([matrixd] context_group / context_position).
    context: bool = True


class SmartSearchRequest(SearchOptions, kw_only=True, forbid_unknown_fields=True):
    max_iterations: int = 3
    # Reflection's bar: a sub-query is answered when a hit's vector similarity reaches it.
    min_confidence: float | None = None
    # The metadata field holding an item's ISO date; a question's time range prefers it.
    date_field: str = "date"
    # Fusion and playbook options, applied to every sub-query (see MatrixSearchRequest).
    per_corpus_k: K | None = None
    ef_search: EfSearch | None = None
    fusion: Literal["rrf", "weighted", "dbsf"] | None = None
    rrf_k: Annotated[int, Meta(ge=1, le=MAX_RRF_K)] | None = None  # one range everywhere
    weights: dict[str, Weight] | None = None
    candidates: K | None = None
    prefer: dict[str, Any] | None = None
    use_playbook: bool = False
    playbook_corpus: str | None = None


class SearchAutoRequest(SearchOptions, kw_only=True, forbid_unknown_fields=True):
    budget_ms: float | None = None  # the chosen strategy's expected time must fit
