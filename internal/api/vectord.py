"""vectord's request and response shapes (docs/API.md), decoded and encoded by msgspec."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

from lakehouse.wire import responses as wire
from lakehouse.wire.features import QueryStats
from lakehouse.wire.shapes import (  # shared with the client: defined there once
    MAX_BM25_K1 as MAX_BM25_K1,
)
from lakehouse.wire.shapes import (
    MAX_DIM as MAX_DIM,
)
from lakehouse.wire.shapes import (
    MAX_ID_BYTES as MAX_ID_BYTES,
)
from lakehouse.wire.shapes import (
    MAX_IDS_PAGE as MAX_IDS_PAGE,
)
from lakehouse.wire.shapes import (
    MAX_K as MAX_K,
)
from lakehouse.wire.shapes import (
    MAX_QUERY_CHARS as MAX_QUERY_CHARS,
)
from lakehouse.wire.shapes import (
    MAX_RRF_K as MAX_RRF_K,
)
from lakehouse.wire.shapes import (
    MAX_WEIGHT as MAX_WEIGHT,
)
from lakehouse.wire.shapes import (
    MODES as MODES,
)
from lakehouse.wire.shapes import (
    NAME_PATTERN as NAME_PATTERN,
)
from lakehouse.wire.shapes import (
    CorpusName as CorpusName,
)
from lakehouse.wire.shapes import (
    DateRange as DateRange,
)
from lakehouse.wire.shapes import (
    Dim as Dim,
)
from lakehouse.wire.shapes import (
    EfSearch as EfSearch,
)
from lakehouse.wire.shapes import (
    FieldWeights as FieldWeights,
)
from lakehouse.wire.shapes import (
    Filter as Filter,
)
from lakehouse.wire.shapes import (
    Hit as Hit,
)
from lakehouse.wire.shapes import (
    ItemId as ItemId,
)
from lakehouse.wire.shapes import (
    K as K,
)
from lakehouse.wire.shapes import (
    Label as Label,
)
from lakehouse.wire.shapes import (
    Metric as Metric,
)
from lakehouse.wire.shapes import (
    Mode as Mode,
)
from lakehouse.wire.shapes import (
    NumberRange as NumberRange,
)
from lakehouse.wire.shapes import (
    Prf as Prf,
)
from lakehouse.wire.shapes import (
    QueryText as QueryText,
)
from lakehouse.wire.shapes import (
    Vector as Vector,
)
from lakehouse.wire.shapes import (
    Weight as Weight,
)
from lakehouse.wire.shapes import (
    embed_text as embed_text,
)

H = TypeVar("H")


class CreateCorpus(msgspec.Struct, forbid_unknown_fields=True):
    name: CorpusName
    dim: Dim
    metric: Metric = "cosine"
    language: Label | None = None
    model: Label | None = None
    # True: no HNSW index until POST .../index (bulk loads build it once, afterwards).
    defer_index: bool = False


class Item(msgspec.Struct, forbid_unknown_fields=True):
    id: ItemId
    vector: Vector
    text: str
    title: str | None = None
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    language: Label | None = None


class UpsertRequest(msgspec.Struct, forbid_unknown_fields=True):
    # At most [vectord] max_batch items (413 beyond; /openapi.json states the configured limit).
    items: list[Item]
    model: Label | None = None


class ReembedRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/vectors/corpora/{name}/reembed: embed the stored texts with this model."""

    model: Label


class DeleteItems(msgspec.Struct, forbid_unknown_fields=True):
    ids: list[str]  # at most 10,000 (413 beyond)


MAX_QUERY_VECTORS = 16


class QueryVector(msgspec.Struct, forbid_unknown_fields=True):
    """The query embedded by one model: used for the corpora that record that model."""

    model: Label
    vector: Vector


MAX_FRAGMENT_CHARS = 2000
MAX_FRAGMENTS = 10
MAX_GROUP_SIZE = 100
MAX_FACET_SIZE = 1000
MAX_FACETS = 16
MARK = Annotated[str, Meta(max_length=64)]
FieldPath = Annotated[str, Meta(min_length=1, max_length=256)]


class Highlight(msgspec.Struct, forbid_unknown_fields=True):
    """Fragments of each hit's fields with the query's words marked (internal.vectord.shaping.fragments).

    The words marked are those the lexical layer matched: the query's lexemes, stemmed in
    each item's own language (PRF expansion terms are not marked). The stored text is
    HTML-escaped; only `pre` and `post` are added.
    """

    fields: list[Literal["title", "text"]] = msgspec.field(
        default_factory=lambda: ["title", "text"])
    pre: MARK = "<mark>"
    post: MARK = "</mark>"
    fragment_chars: Annotated[int, Meta(ge=20, le=MAX_FRAGMENT_CHARS)] = 160
    fragments: Annotated[int, Meta(ge=1, le=MAX_FRAGMENTS)] = 2


class FacetSpec(msgspec.Struct, forbid_unknown_fields=True):
    """A facet given as an object: a date histogram of a metadata field, by month."""

    field: FieldPath
    interval: Literal["month"] | None = None


class Recency(msgspec.Struct, forbid_unknown_fields=True):
    """A decay boost by age (internal.vectord.shaping.shaped.decay): see docs/API.md, "recency"."""

    half_life_days: Annotated[float, Meta(gt=0, le=1_000_000)]
    field: FieldPath = "updated_at"
    weight: Annotated[float, Meta(ge=0, le=1)] = 0.5


class SearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    mode: Mode = "vector"
    query_vector: Vector | None = None
    # The query embedded once per model in use (matrixd sends them). Given: a corpus is
    # searched with the vector of the model it records (a corpus with no model: with
    # query_vector when its dimension fits), and a corpus none fits has no vector branch
    # (its result says `skipped`) instead of failing.
    query_vectors: Annotated[list[QueryVector], Meta(max_length=MAX_QUERY_VECTORS)] | None = None
    query_text: QueryText | None = None
    k: K = 10
    ef_search: EfSearch | None = None
    language: Label | None = None
    filter: Filter | None = None
    # lexical and hybrid modes; None: the [vectord] setting.
    bm25_k1: Annotated[float, Meta(ge=0, le=MAX_BM25_K1)] | None = None
    bm25_b: Annotated[float, Meta(ge=0, le=1)] | None = None
    field_weights: FieldWeights | None = None
    rrf_k: Annotated[int, Meta(ge=1, le=MAX_RRF_K)] | None = None
    # hybrid: how many hits each branch feeds the fusion (k..1000)
    candidates: K | None = None
    # hybrid fusion: rrf | weighted | dbsf; None: the [vectord] setting.
    fusion: Literal["rrf", "weighted", "dbsf"] | None = None
    weights: dict[str, Weight] | None = None  # vector / lexical / symbolic
    prefer: Filter | None = None  # soft preferences: the symbolic layer's score
    prf: Prf | None = None  # hybrid: pseudo-relevance feedback; None: the default (prf.py)
    # How the results are shaped (internal.vectord.shaping.shaped); absent: today's answer, byte
    # for byte. true: Highlight's defaults.
    highlight: bool | Highlight | None = None
    group_by: FieldPath | None = None  # "parent" | "metadata.<key>"
    group_size: Annotated[int, Meta(ge=1, le=MAX_GROUP_SIZE)] = 1
    facets: Annotated[list[FieldPath | FacetSpec], Meta(max_length=MAX_FACETS)] | None = None
    facet_size: Annotated[int, Meta(ge=1, le=MAX_FACET_SIZE)] = 20
    diversity: Annotated[float, Meta(ge=0, le=1)] | None = None
    recency: Recency | None = None


class IncludeRef(msgspec.Struct, forbid_unknown_fields=True):
    """An item to score as a candidate whatever retrieval finds (the playbook's recall)."""

    corpus: str
    id: str
    # Hybrid only: the playbook's factor, applied inside the fusion (distance x factor,
    # BM25 / factor) so a recalled answer competes at its boosted strength.
    factor: Annotated[float, Meta(ge=0.5, le=1.5)] = 1.0


MAX_INCLUDE = 100


class MultiSearchRequest(SearchRequest, kw_only=True, forbid_unknown_fields=True):
    """POST /v1/vectors/search: one search (the same fields) over several corpora.

    Ranked as one corpus holding their union (internal.vectord.search.union_merge).
    """

    # None: every corpus but exclude_corpora
    corpora: Annotated[list[str], Meta(min_length=1, max_length=1000)] | None = None
    exclude_corpora: list[str] = []
    corpus_weights: dict[str, float] | None = None  # after fusion; see merge.py
    # Always candidates in every branch the mode has, scored like any other; returned even
    # below the top k (flagged `included`), so a caller's boost can lift them.
    include: list[IncludeRef] = []
    # Hybrid: each hit's `features` and the answer's `query_stats` (the learned ranker's).
    features: bool = False


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
    # The shared vector index of its embedding space (vectord's space_index); None: not
    # attached (its index deferred, or not migrated yet).
    space_id: int | None = None

    def public(self, count: int, reembed: wire.Reembedding | None = None) -> wire.Corpus:
        """The corpus as clients see it (`reembed` only while one runs)."""
        return wire.Corpus(name=self.name, dim=self.dim, metric=self.metric,
                           language=self.language, model=self.model, count=count,
                           created_at=self.created_at, reembed=reembed)


class SearchResponse(msgspec.Struct):
    corpus: str
    mode: str
    hits: list[Hit]
    took_ms: float
    facets: dict[str, dict[str, int]] | msgspec.UnsetType = msgspec.UNSET


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
    # Why its vector branch did not run (no query vector of its model): lexical-only in
    # hybrid mode, nothing in vector mode.
    skipped: str | msgspec.UnsetType = msgspec.UNSET


class Space(msgspec.Struct):
    """An embedding space: the corpora that share a model label and a dimension."""

    model: str | None
    dim: int
    corpora: list[str]


class SpacesResponse(msgspec.Struct):
    """GET /v1/vectors/spaces: every corpus by embedding space (no counts: cheap)."""

    spaces: list[Space]


class MultiSearchResult(msgspec.Struct, Generic[H]):
    """POST /v1/vectors/search's answer, with hits of type H: vectord sends Hit
    (MultiSearchResponse); matrixd reads them as JSON objects it annotates in place."""

    mode: str
    hits: list[H]  # merged over the corpora, best first, each with its corpus
    results: list[CorpusSearchResult]
    took_ms: float
    include_missing: int = 0  # `include` items that do not exist (or are in no searched corpus)
    # Value counts over the lexical match set and the filter, only when `facets` was asked.
    facets: dict[str, dict[str, int]] | msgspec.UnsetType = msgspec.UNSET
    query_stats: QueryStats | msgspec.UnsetType = msgspec.UNSET  # with `features`


class MultiSearchResponse(MultiSearchResult[Hit]):
    """POST /v1/vectors/search's answer as vectord sends it."""
