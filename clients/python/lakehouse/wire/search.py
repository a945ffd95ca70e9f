"""A search's fields, declared once (I/O-free): the contract every layer builds on.

`SearchSpec` is one search as any layer runs it: what to look for, how to rank and how
to shape the answer (vectord's per-corpus route takes exactly this). `FederatedSpec`
adds where to look, over several corpora ranked as their union; `MatrixSearchRequest`
(POST /v1/matrix/search, what the client sends) adds what matrixd does around the
search: the playbook, the relevance filter, the downgrade gate. vectord's multi-corpus
request (internal.api.vectord.MultiSearchRequest) and smart search's options
(internal.api.matrixd) extend these in turn (msgspec structs inherit fields), so a
field has one name and one type from the client to SQL.

The ranges are the annotations', checked at decode time; what depends on the stack
(the configured max_k, a registered mode or fusion, which corpora exist) is checked
once at each daemon's edge (internal.api.search).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from lakehouse.wire.shapes import (
    MAX_BM25_K1,
    MAX_RRF_K,
    CorpusName,
    DowngradeOption,
    EfSearch,
    FieldWeights,
    Filter,
    K,
    Label,
    Prf,
    QueryText,
    Vector,
    Weight,
)

# A mode's and a fusion method's names: checked against their registries
# (lakehouse.wire.modes) at each daemon's edge, not frozen into a Literal here.
ModeName = Annotated[str, Meta(min_length=1, max_length=64, description=(
    "a search mode: vector, keyword, lexical or hybrid (this stack's: the enum in "
    "/openapi.json)"))]
FusionName = Annotated[str, Meta(min_length=1, max_length=64, description=(
    "hybrid's fusion: rrf, weighted or dbsf (this stack's: the enum in /openapi.json)"))]

MAX_FRAGMENT_CHARS = 2000
MAX_FRAGMENTS = 10
MAX_GROUP_SIZE = 100
MAX_FACET_SIZE = 1000
MAX_FACETS = 16
MARK = Annotated[str, Meta(max_length=64)]
FieldPath = Annotated[str, Meta(min_length=1, max_length=256)]
RrfK = Annotated[int, Meta(ge=1, le=MAX_RRF_K)]
LAYERS = ("vector", "lexical", "symbolic")  # the fusion's layers: the keys of `weights`
Corpora = Annotated[list[str], Meta(min_length=1, max_length=1000)]


class Highlight(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
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


class FacetSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A facet given as an object: a date histogram of a metadata field, by month."""

    field: FieldPath
    interval: Literal["month"] | None = None


class Recency(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A decay boost by age (internal.vectord.shaping.shaped.decay): see docs/API.md, "recency"."""

    half_life_days: Annotated[float, Meta(gt=0, le=1_000_000)]
    field: FieldPath = "updated_at"
    weight: Annotated[float, Meta(ge=0, le=1)] = 0.5


# The relevance filter's input (internal.matrixd.relevance scores it): the focus file.
class Focus(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    path: str
    text: str | None = None
    defined_symbols: list[str] | None = None
    imported_symbols: list[str] | None = None


DEFAULT_RELEVANCE_THRESHOLD = 0.3  # a chunk scoring below it is dropped
# Relevance scores are sums of a handful of signal weights (internal.matrixd.relevance.WEIGHTS).
Threshold = Annotated[float, Meta(ge=-100, le=100)]


class RelevanceOption(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    focus: Focus
    threshold: Threshold = DEFAULT_RELEVANCE_THRESHOLD


class SearchSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One search: what to look for, how to rank, how to shape the answer."""

    # A registered mode (lakehouse.wire.modes.MODES); None: hybrid for a text query, else
    # vector. What the mode needs (text, vector) is checked at each daemon's edge.
    mode: ModeName | None = None
    query_text: QueryText | None = None
    query_vector: Vector | None = None
    k: K = 10
    language: Label | None = None  # the query's language; None: each corpus's own
    filter: Filter | None = None  # must hold
    ef_search: EfSearch | None = None  # None: each corpus's own (its index settings)
    # BM25 (lexical and hybrid); None: the [vectord] settings.
    bm25_k1: Annotated[float, Meta(ge=0, le=MAX_BM25_K1)] | None = None
    bm25_b: Annotated[float, Meta(ge=0, le=1)] | None = None
    field_weights: FieldWeights | None = None
    # The fusion's options (modes whose registry entry says `fusion`; ignored by the
    # others). fusion None: vectord's default method; rrf_k None: [vectord] fusion_rrf_k.
    fusion: FusionName | None = None
    rrf_k: RrfK | None = None  # rrf's rank constant: w / (rrf_k + rank)
    weights: dict[str, Weight] | None = None  # vector / lexical / symbolic
    candidates: K | None = None  # how many hits each branch feeds the fusion (k..1000)
    prefer: Filter | None = None  # soft preferences: the symbolic layer's score
    prf: Prf | None = None  # pseudo-relevance feedback; None: the default
    # How the results are shaped (internal.vectord.shaping.shaped); absent: the plain
    # ranking. highlight true: Highlight's defaults.
    highlight: bool | Highlight | None = None
    group_by: FieldPath | None = None  # "parent" | "metadata.<key>"
    group_size: Annotated[int, Meta(ge=1, le=MAX_GROUP_SIZE)] = 1
    facets: Annotated[list[FieldPath | FacetSpec], Meta(max_length=MAX_FACETS)] | None = None
    facet_size: Annotated[int, Meta(ge=1, le=MAX_FACET_SIZE)] = 20
    diversity: Annotated[float, Meta(ge=0, le=1)] | None = None
    recency: Recency | None = None


class FederatedSpec(SearchSpec, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A search over several corpora, ranked as one corpus holding their union."""

    # None: every corpus (matrixd: but the playbooks).
    corpora: Corpora | None = None
    # Tilts a corpus after fusion: merge_score x w, or distance / w when ranked by
    # distance; each a searched corpus's, a finite number > 0.
    corpus_weights: dict[str, float] | None = None
    # Resource selection: each corpus weighed by how much the question is about it (its
    # profile, name and description against the other searched corpora); a corpus
    # `corpus_weights` names keeps its given weight. False: the union's ranking as it is.
    corpus_selection: bool = True


class MatrixSearchRequest(FederatedSpec, kw_only=True, forbid_unknown_fields=True,
                          omit_defaults=True):
    """POST /v1/matrix/search: a federated search and what matrixd does around it.

    At most [matrixd] max_corpora corpora (64); k, per_corpus_k and playbook_top_k at
    most [matrixd] max_k.
    """

    per_corpus_k: K | None = None  # the depth searched before the boost and the filters cut to k
    allow_partial: bool = False
    use_playbook: bool = False
    playbook_corpus: CorpusName | None = None
    playbook_top_k: K | None = None
    playbook_max_distance: Annotated[float, Meta(ge=0)] | None = None
    relevance: RelevanceOption | None = None
    downgrade: DowngradeOption | None = None
    # With the learned ranker ordering the hits: each one's largest feature contributions.
    explain: bool = False


class SearchOptions(MatrixSearchRequest, kw_only=True, forbid_unknown_fields=True,
                    omit_defaults=True):
    """What smart_search and search_auto take: a matrix search (above), whose
    options every search they run is given, and the instant the question is read at. They
    pick each search's mode and text themselves: `mode` and `query_vector` are refused.
    Checked in one place (internal.matrixd.smart.check_options): the query text, the
    corpus names, k within 1..[matrixd] max_k, `now` an ISO instant."""

    now: str | None = None  # ISO 8601: the instant "yesterday" is read against (default: now)
    # Judge a dialogue turn with its neighbours (internal.understanding.context): hits whose
    # metadata names a thread and a position ([matrixd] context_group / context_position).
    context: bool = True


class SmartSearchRequest(SearchOptions, kw_only=True, forbid_unknown_fields=True,
                         omit_defaults=True):
    max_iterations: int = 3
    # Reflection's bar: a sub-query is answered when a hit's vector similarity reaches it.
    min_confidence: float | None = None
    # The metadata field holding an item's ISO date; a question's time range prefers it.
    date_field: str = "date"


class SearchAutoRequest(SearchOptions, kw_only=True, forbid_unknown_fields=True,
                        omit_defaults=True):
    budget_ms: float | None = None  # the chosen strategy's expected time must fit


SEARCH_FIELDS: tuple[str, ...] = SearchSpec.__struct_fields__
