"""matrixd's request shapes (I/O-free, so the gateway's /openapi.json can use them too)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from internal.matrixd import relevance
from internal.matrixd.relevance import Chunk, Focus

Mode = Literal["vector", "lexical", "hybrid", "keyword"]


class RelevanceOption(msgspec.Struct, forbid_unknown_fields=True):
    focus: Focus
    threshold: float = relevance.DEFAULT_THRESHOLD


class MatrixSearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    corpora: list[str]
    query_text: str | None = None
    query_vector: list[float] | None = None
    k: int = 10
    per_corpus_k: int | None = None
    mode: Mode | None = None
    # Passed through to vectord unchanged, which validates it (docs/API.md).
    filter: dict[str, Any] | None = None
    language: str | None = None
    ef_search: int | None = None
    fusion: str | None = None
    rrf_k: int | None = None
    weights: dict[str, float] | None = None
    candidates: int | None = None
    prefer: dict[str, Any] | None = None
    allow_partial: bool = False
    use_playbook: bool = False
    playbook_corpus: str | None = None
    playbook_top_k: int | None = None
    playbook_max_distance: float | None = None
    relevance: RelevanceOption | None = None


class RecordRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: str
    answer_id: str
    answer_corpus: str
    score: float
    tags: list[str] = msgspec.field(default_factory=list)
    playbook_corpus: str | None = None


class RelevanceRequest(msgspec.Struct, forbid_unknown_fields=True):
    focus: Focus
    chunks: list[Chunk]
    threshold: float = relevance.DEFAULT_THRESHOLD


# ---- query intelligence (issue 17) ---------------------------------------------------------

MAX_OBSERVATIONS = 1000  # a normalize request holds at most this many (413 beyond)


class AnalyzeRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: str
    now: str | None = None  # ISO 8601; relative dates resolve against it (default: now)


class ObservationIn(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    reference_time: str | None = None  # ISO 8601: when it was said ("yesterday" is the day before)
    speaker: str | None = None


class NormalizeRequest(msgspec.Struct, forbid_unknown_fields=True):
    observations: list[ObservationIn]
    context: list[str] = msgspec.field(default_factory=list)


class SmartSearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: str
    corpora: list[str] | None = None  # absent: every corpus but the playbook
    k: int = 10
    max_iterations: int = 3
    now: str | None = None
    # Reflection's bar: a sub-query is answered when a hit's vector similarity reaches it.
    min_confidence: float | None = None
    # The metadata field holding an item's ISO date; a question's time range prefers it.
    date_field: str = "date"
    # The search options, applied to every sub-query (see MatrixSearchRequest).
    per_corpus_k: int | None = None
    filter: dict[str, Any] | None = None
    language: str | None = None
    ef_search: int | None = None
    fusion: str | None = None
    rrf_k: int | None = None
    weights: dict[str, float] | None = None
    candidates: int | None = None
    prefer: dict[str, Any] | None = None
    allow_partial: bool = False
    use_playbook: bool = False
    playbook_corpus: str | None = None


class SearchAutoRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: str
    corpora: list[str] | None = None  # absent: every corpus but the playbook
    k: int = 10
    budget_ms: float | None = None  # the chosen strategy's expected time must fit
    now: str | None = None
    filter: dict[str, Any] | None = None
    language: str | None = None
    allow_partial: bool = False
