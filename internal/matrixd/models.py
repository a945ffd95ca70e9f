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
    corpora: list[str] | None = None  # None: every corpus except playbook corpora
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
    prf: dict[str, Any] | None = None  # hybrid: pseudo-relevance feedback (vectord checks it)
    allow_partial: bool = False
    use_playbook: bool = False
    playbook_corpus: str | None = None
    playbook_top_k: int | None = None
    playbook_max_distance: float | None = None
    relevance: RelevanceOption | None = None
    # Tilts a corpus after fusion: merge_score x w, or distance / w in vector mode.
    corpus_weights: dict[str, float] | None = None


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
