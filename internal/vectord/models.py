"""vectord's request and response shapes (docs/API.md), decoded and encoded by msgspec."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

Metric = Literal["cosine", "l2", "ip"]
Mode = Literal["vector", "keyword", "lexical", "hybrid"]

# HNSW indexes vector columns of at most 2,000 dimensions (pgvector's limit).
MAX_DIM = 2000
MAX_K = 1000  # also the ceiling of hnsw.ef_search


class CreateCorpus(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    dim: int
    metric: Metric = "cosine"
    language: str | None = None
    model: str | None = None
    # True: no HNSW index until POST .../index (bulk loads build it once, afterwards).
    defer_index: bool = False


class Item(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    vector: list[float]
    text: str
    title: str | None = None
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    language: str | None = None


class UpsertRequest(msgspec.Struct, forbid_unknown_fields=True):
    items: list[Item]
    model: str | None = None


class DeleteItems(msgspec.Struct, forbid_unknown_fields=True):
    ids: list[str]


class DateRange(msgspec.Struct, forbid_unknown_fields=True):
    """An ISO-8601 date/time metadata field within [after, before) (issue 8)."""

    field: str
    after: datetime | None = None
    before: datetime | None = None


class NumberRange(msgspec.Struct, forbid_unknown_fields=True):
    """A numeric metadata field (e.g. importance) within bounds (issue 8)."""

    field: str
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    """Hard filters; internal.vectord.filters turns one into a SQL where-clause.

    Used as `prefer` too: then each condition given is one soft preference, and the
    share of them an item meets is its symbolic score.
    """

    metadata: dict[str, Any] | None = None
    id_prefix: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    # The symbolic layer (issue 8).
    tags_any: list[str] | None = None
    tags_all: list[str] | None = None
    type: str | list[str] | None = None  # metadata.type, one of
    date: DateRange | None = None
    range: NumberRange | None = None
    parent_id: str | None = None  # metadata.parent_id
    has: list[str] | None = None  # metadata fields that must be present


class FieldWeights(msgspec.Struct, forbid_unknown_fields=True):
    """BM25 term-frequency weights of the title (A), text (B) and tags (C) fields."""

    title: float = 1.0
    text: float = 1.0
    tags: float = 1.0


class Prf(msgspec.Struct, forbid_unknown_fields=True):
    """Pseudo-relevance feedback of hybrid search (issue 14; internal.vectord.prf).

    The top `docs` fused hits of a first pass are taken as relevant: the query vector
    moves toward their mean (Rocchio) when `vector`, and the lexical query gains their
    `terms` best expansion lexemes (RM3) when terms > 0; `weight` is the feedback's
    weight against the original query's 1 in both. docs 0: off, the plain search.
    """

    docs: int = 0
    terms: int = 0
    weight: float = 0.5
    vector: bool = True


class SearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    mode: Mode = "vector"
    query_vector: list[float] | None = None
    query_text: str | None = None
    k: int = 10
    ef_search: int | None = None
    language: str | None = None
    filter: Filter | None = None
    # lexical and hybrid modes (issue 3); None: the [vectord] setting.
    bm25_k1: float | None = None
    bm25_b: float | None = None
    field_weights: FieldWeights | None = None
    rrf_k: int | None = None
    candidates: int | None = None  # hybrid: how many hits each branch feeds the fusion
    # hybrid fusion (issue 8): rrf | weighted | dbsf; None: the [vectord] setting.
    fusion: Literal["rrf", "weighted", "dbsf"] | None = None
    weights: dict[str, float] | None = None  # vector / lexical / symbolic
    prefer: Filter | None = None  # soft preferences: the symbolic layer's score
    prf: Prf | None = None  # hybrid: pseudo-relevance feedback; None: the default (prf.py)


class MultiSearchRequest(SearchRequest, kw_only=True, forbid_unknown_fields=True):
    """POST /v1/vectors/search: one search (the same fields) over several corpora.

    Ranked as one corpus holding their union (internal.vectord.federation).
    """

    corpora: list[str] | None = None  # None: every corpus but exclude_corpora
    exclude_corpora: list[str] = []
    corpus_weights: dict[str, float] | None = None  # after fusion; see federation.py


class Corpus(msgspec.Struct, frozen=True):
    """A registry row. `id` names the items table (vectord_items_<id>); never shown to clients."""

    id: int
    name: str
    dim: int
    metric: Metric
    language: str
    model: str | None
    keyword_index: str  # "trgm" (pg_trgm GIN index) or "scan" (plain ILIKE scan)
    created_at: datetime

    def public(self, count: int) -> dict[str, Any]:
        return {
            "name": self.name, "dim": self.dim, "metric": self.metric,
            "language": self.language, "model": self.model, "count": count,
            "created_at": self.created_at,
        }


class Hit(msgspec.Struct):
    id: str
    corpus: str
    distance: float | None
    score: float | None
    ranks: dict[str, int | None]
    scores: dict[str, float | None]
    text: str
    title: str | None
    tags: list[str]
    metadata: dict[str, Any]
    language: str
    updated_at: datetime
    # Layers that found this hit: vector, lexical, symbolic (a preference met).
    matched_layers: list[str] = []
    # The cross-corpus ranking key (internal.vectord.federation): score x corpus weight in
    # score-ranked modes, distance / corpus weight in vector mode.
    merge_score: float | None = None
    merge_distance: float | None = None


class SearchResponse(msgspec.Struct):
    corpus: str
    mode: str
    hits: list[Hit]
    took_ms: float


class SearchError(msgspec.Struct, omit_defaults=True):
    """The error body's `error` object (docs/API.md), for one corpus of a multi-search."""

    code: str
    message: str
    field: str | None = None


class CorpusSearchResult(msgspec.Struct, omit_defaults=True):
    """One corpus of a multi-search: how many of the merged hits are its own, its time;
    or its error and status, as the per-corpus route would have answered."""

    corpus: str
    hits: int | msgspec.UnsetType = msgspec.UNSET
    took_ms: float | msgspec.UnsetType = msgspec.UNSET
    error: SearchError | msgspec.UnsetType = msgspec.UNSET
    status: int | msgspec.UnsetType = msgspec.UNSET


class MultiSearchResponse(msgspec.Struct):
    mode: str
    hits: list[Hit]  # merged over the corpora, best first, each with its corpus
    results: list[CorpusSearchResult]
    took_ms: float
