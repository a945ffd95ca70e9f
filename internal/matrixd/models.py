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


class DowngradeOption(msgspec.Struct, forbid_unknown_fields=True):
    """Per-request downgrade conditions, laid over `[matrixd] downgrade_*` (0 / false: off)."""

    max_distance: float | None = None
    min_score: float | None = None
    max_age_days: float | None = None
    disputed: bool | None = None


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
    downgrade: DowngradeOption | None = None


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
