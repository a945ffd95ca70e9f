"""vectord's request and response shapes (docs/API.md), decoded and encoded by msgspec."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

import msgspec
from msgspec import Meta

from lakehouse.wire import responses as wire
from lakehouse.wire.features import QueryStats
from lakehouse.wire.search import (  # the search's fields, declared once there
    MAX_FACET_SIZE,
    MAX_FACETS,
    MAX_GROUP_SIZE,
    FacetSpec,
    FederatedSpec,
    FieldPath,
    Highlight,
    Recency,
    SearchSpec,
)
from lakehouse.wire.selection import CorpusSelection
from lakehouse.wire.shapes import (  # shared with the client: defined there once
    MAX_BM25_K1,
    MAX_DIM,
    MAX_ID_BYTES,
    MAX_IDS_PAGE,
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_RRF_K,
    MAX_WEIGHT,
    NAME_PATTERN,
    CorpusName,
    DateRange,
    Description,
    Dim,
    EfSearch,
    FieldWeights,
    Filter,
    Hit,
    ItemId,
    K,
    Label,
    Metric,
    NumberRange,
    Precision,
    Prf,
    QueryText,
    Vector,
    Weight,
    embed_text,
)

__all__ = [  # what the server's modules take from here, the wire's shared parts included
    "MAX_BM25_K1", "MAX_DIM", "MAX_FACETS", "MAX_FACET_SIZE", "MAX_GROUP_SIZE",
    "MAX_IDS_PAGE", "MAX_ID_BYTES", "MAX_INCLUDE", "MAX_K", "MAX_QUERY_CHARS",
    "MAX_QUERY_VECTORS", "MAX_RRF_K", "MAX_WEIGHT", "NAME_PATTERN",
    "ConvertRequest", "Corpus",
    "CorpusName", "CorpusSearchResult", "CreateCorpus", "DateRange", "DeleteItems",
    "Description", "Dim",
    "EfSearch", "FacetSpec", "FieldPath", "FieldWeights", "Filter", "Highlight", "Hit",
    "IncludeRef", "IndexSettingsRequest", "Item", "ItemId", "K", "Label", "Metric", "MultiSearchRequest",
    "MultiSearchResponse", "MultiSearchResult", "NumberRange", "Precision", "Prf", "QueryText",
    "QueryVector", "Recency", "ReembedRequest", "SearchError", "SearchRequest",
    "SearchResponse", "SearchSpec", "Space", "SpacesResponse", "UpdateCorpus", "UpsertRequest",
    "Vector", "Weight", "embed_text",
]

H = TypeVar("H")


# An HNSW graph's neighbours a node (pgvector's range) and its build's candidate list.
HnswM = Annotated[int, Meta(ge=2, le=100)]
EfConstruction = Annotated[int, Meta(ge=4, le=1000)]
ExactScanRows = Annotated[int, Meta(ge=0, le=100_000_000)]


class IndexSettingsRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A corpus's vector index settings (each None: as it is, or [vectord]'s default at
    creation). `ef_construction` must be at least 2 m (pgvector's rule)."""

    m: HnswM | None = None
    ef_construction: EfConstruction | None = None
    ef_search: EfSearch | None = None
    exact_scan_rows: ExactScanRows | None = None


class CreateCorpus(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: CorpusName
    dim: Dim
    metric: Metric = "cosine"
    language: Label | None = None
    model: Label | None = None
    # True: no HNSW index until POST .../index (bulk loads build it once, afterwards).
    defer_index: bool = False
    # None: [vectord] precision (float16 unless configured otherwise).
    precision: Precision | None = None
    # None: [vectord]'s hnsw_m, hnsw_ef_construction, ef_search, exact_scan_rows.
    index: IndexSettingsRequest | None = None
    # What the corpus is about, in a person's words (the fan-out's resource selection reads it).
    description: Description | None = None


class UpdateCorpus(msgspec.Struct, forbid_unknown_fields=True):
    """PATCH /v1/vectors/corpora/{name}: what may change of a corpus (null or "" clears)."""

    description: Description | None


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


class ConvertRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/vectors/corpora/{name}/convert: store the corpus's vectors in this precision."""

    precision: Precision


class DeleteItems(msgspec.Struct, forbid_unknown_fields=True):
    ids: list[str]  # at most 10,000 (413 beyond)


MAX_QUERY_VECTORS = 16


class QueryVector(msgspec.Struct, forbid_unknown_fields=True):
    """The query embedded by one model: used for the corpora that record that model."""

    model: Label
    vector: Vector


class SearchRequest(SearchSpec, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """POST /v1/vectors/corpora/{name}/search: one search over one corpus, the spec as it is."""


class IncludeRef(msgspec.Struct, forbid_unknown_fields=True):
    """An item to score as a candidate whatever retrieval finds (the playbook's recall)."""

    corpus: CorpusName
    id: str  # checked as an id at the edge (validate.item_id: its bytes)
    # Hybrid only: the playbook's factor, applied inside the fusion (distance x factor,
    # BM25 / factor) so a recalled answer competes at its boosted strength.
    factor: Annotated[float, Meta(ge=0.5, le=1.5)] = 1.0


MAX_INCLUDE = 100


class MultiSearchRequest(FederatedSpec, kw_only=True, forbid_unknown_fields=True,
                         omit_defaults=True):
    """POST /v1/vectors/search: one search over several corpora (lakehouse.wire.search's
    FederatedSpec), ranked as one corpus holding their union (internal.vectord.search.union_merge);
    what matrixd adds for vectord: the query embedded per model, the corpora left out
    when none are named, the playbook's items.
    """

    # The query embedded once per model in use (matrixd sends them). Given: a corpus is
    # searched with the vector of the model it records (a corpus with no model: with
    # query_vector when its dimension fits), and a corpus none fits has no vector branch
    # (its result says `skipped`) instead of failing.
    query_vectors: Annotated[list[QueryVector], Meta(max_length=MAX_QUERY_VECTORS)] | None = None
    # With corpora None: every corpus but these.
    exclude_corpora: list[str] = msgspec.field(default_factory=list)
    # Always candidates in every branch the mode has, scored like any other; returned even
    # below the top k (flagged `included`), so a caller's boost can lift them.
    include: Annotated[list[IncludeRef], Meta(max_length=MAX_INCLUDE)] = msgspec.field(
        default_factory=list)
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
    # Must match the items table's column: halfvec(dim) for float16, vector(dim) for
    # float32 (a corpus from before precisions is float32).
    precision: Precision = "float32"
    # Its vector index's settings (None: a corpus from before them, which follows
    # [vectord]'s; `settings` resolves them).
    hnsw_m: int | None = None
    hnsw_ef_construction: int | None = None
    ef_search: int | None = None
    exact_scan_rows: int | None = None
    description: str | None = None

    def settings(self, defaults: wire.IndexSettings) -> wire.IndexSettings:
        """The index settings in force: its own, else the service's defaults."""
        return wire.IndexSettings(
            m=self.hnsw_m or defaults.m,
            ef_construction=self.hnsw_ef_construction or defaults.ef_construction,
            ef_search=self.ef_search or defaults.ef_search,
            exact_scan_rows=(defaults.exact_scan_rows if self.exact_scan_rows is None
                             else self.exact_scan_rows))

    def public(self, count: int, reembed: wire.Reembedding | None = None,
               conversion: wire.Conversion | None = None,
               index: wire.IndexSettings | None = None,
               reindex: wire.Reindexing | None = None) -> wire.Corpus:
        """The corpus as clients see it (`reembed`, `conversion`, `reindex` only while
        one runs)."""
        return wire.Corpus(name=self.name, dim=self.dim, metric=self.metric,
                           language=self.language, model=self.model, count=count,
                           created_at=self.created_at, precision=self.precision,
                           reembed=reembed, conversion=conversion, index=index,
                           reindex=reindex, description=self.description)


class SearchResponse(msgspec.Struct):
    corpus: str
    mode: str
    hits: list[Hit]
    took_ms: float
    facets: dict[str, dict[str, int]] | msgspec.UnsetType = msgspec.UNSET
    # The question with its words no corpus holds corrected (lexical/typos.py).
    did_you_mean: str | msgspec.UnsetType = msgspec.UNSET


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
    # Resource selection's score, weight and evidence (when it ran over this search).
    selection: CorpusSelection | msgspec.UnsetType = msgspec.UNSET


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
    # The question with its words no searched corpus holds corrected (lexical/typos.py).
    did_you_mean: str | msgspec.UnsetType = msgspec.UNSET


class MultiSearchResponse(MultiSearchResult[Hit]):
    """POST /v1/vectors/search's answer as vectord sends it."""
