"""The wire shapes the server and the client share (I/O-free): limits, the annotated
field types, the search options a caller sends (`Filter`, `Prf`, ...) and the `Hit` a
search answers with. internal.api builds its request structs from these; the client
sends and decodes them. Constraints live in the annotations, checked at decode time."""

from __future__ import annotations

import typing
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from lakehouse.wire.features import HitFeatures

Metric = Literal["cosine", "l2", "ip"]
# How a corpus stores its vectors and their HNSW graph: float16 (pgvector's halfvec, half
# the bytes, the same recall; the default) or float32 (vector).
Precision = Literal["float16", "float32"]
PRECISIONS: tuple[str, ...] = typing.get_args(Precision)

# HNSW indexes vector columns of at most 2,000 dimensions (pgvector's limit).
MAX_DIM = 2000
MAX_K = 1000  # also the ceiling of hnsw.ef_search
# Ids are at most 512 bytes of UTF-8 (validate.item_id counts the bytes; the schema below
# can only say characters): with PostgreSQL's longest lexeme (2,046 bytes) a postings key
# (lexeme, item_id) then always fits a btree row (2,704 bytes).
MAX_ID_BYTES = 512
# A query is stemmed into a tsvector, which PostgreSQL caps at 1 MB; 16k characters is far
# beyond any real query (the embedding model reads 256 tokens) and far below the cap.
MAX_QUERY_CHARS = 16384
MAX_RRF_K = 100_000
MAX_BM25_K1 = 100.0
MAX_WEIGHT = 1000.0  # fusion and field weights; only their ratios matter
MAX_IDS_PAGE = 10_000  # ids per delete call and per /ids page
# Pseudo-relevance feedback's ranges (Prf).
MAX_PRF_DOCS = 50
MAX_PRF_TERMS = 100
MAX_PRF_WEIGHT = 10.0
NAME_PATTERN = "^[a-z][a-z0-9_]{0,62}$"


CorpusName = Annotated[str, Meta(pattern=NAME_PATTERN, description="corpus name")]
ItemId = Annotated[str, Meta(min_length=1, max_length=MAX_ID_BYTES,
                             description=f"at most {MAX_ID_BYTES} bytes of UTF-8, no NUL")]
K = Annotated[int, Meta(ge=1, le=MAX_K)]
EfSearch = Annotated[int, Meta(ge=1, le=MAX_K)]
Dim = Annotated[int, Meta(ge=1, le=MAX_DIM)]
QueryText = Annotated[str, Meta(max_length=MAX_QUERY_CHARS)]
Vector = Annotated[list[float], Meta(min_length=1, max_length=MAX_DIM)]
Weight = Annotated[float, Meta(ge=0, le=MAX_WEIGHT)]
Label = Annotated[str, Meta(max_length=256)]  # model labels, languages
MAX_DESCRIPTION_CHARS = 2000
# What a corpus is about, in its owner's words (a corpus's description).
Description = Annotated[str, Meta(max_length=MAX_DESCRIPTION_CHARS)]


def embed_text(title: str | None, text: str) -> str:
    """The text an item's vector is made from when the stack embeds it (ingest, the client)."""
    return f"{title}\n{text}" if title else text


class DateRange(msgspec.Struct, forbid_unknown_fields=True):
    """An ISO-8601 date/time metadata field within [after, before)."""

    field: Label
    after: datetime | None = None
    before: datetime | None = None


class NumberRange(msgspec.Struct, forbid_unknown_fields=True):
    """A numeric metadata field (e.g. importance) within bounds."""

    field: Label
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    """Hard filters; internal.vectord.storage.filters turns one into a SQL where-clause.

    Used as `prefer` too: then each condition given is one soft preference, and the
    share of them an item meets is its symbolic score.
    """

    metadata: dict[str, Any] | None = None
    id_prefix: Annotated[str, Meta(max_length=MAX_ID_BYTES)] | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    # The symbolic layer.
    tags_any: list[str] | None = None
    tags_all: list[str] | None = None
    type: str | list[str] | None = None  # metadata.type, one of
    date: DateRange | None = None
    range: NumberRange | None = None
    parent_id: str | None = None  # metadata.parent_id
    has: list[str] | None = None  # metadata fields that must be present
    # Every one of these holds too: a tenant token's filter is ANDed with the caller's
    # this way (internal.common.access.forced_filter). Not in `prefer`.
    # (Filters as objects, each decoded by internal.vectord.storage.filters: a recursive struct
    # would defeat the decoder's depth limits.)
    all_of: Annotated[list[dict[str, Any]], Meta(max_length=8)] | None = None


class FieldWeights(msgspec.Struct, forbid_unknown_fields=True):
    """BM25 term-frequency weights of the title (A), text (B) and tags (C) fields."""

    title: Weight = 1.0
    text: Weight = 1.0
    tags: Weight = 1.0


class Prf(msgspec.Struct, forbid_unknown_fields=True):
    """Pseudo-relevance feedback of hybrid search (internal.vectord.search.prf).

    The top `docs` fused hits of a first pass are taken as relevant: the query vector
    moves toward their mean (Rocchio) when `vector`, and the lexical query gains their
    `terms` best expansion lexemes (RM3) when terms > 0; `weight` is the feedback's
    weight against the original query's 1 in both. docs 0: off, the plain search.
    """

    docs: Annotated[int, Meta(ge=0, le=MAX_PRF_DOCS)] = 0
    terms: Annotated[int, Meta(ge=0, le=MAX_PRF_TERMS)] = 0
    weight: Annotated[float, Meta(ge=0, le=MAX_PRF_WEIGHT)] = 0.5
    vector: bool = True


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
    # The cross-corpus ranking key (internal.vectord.search.union_merge): score x corpus weight in
    # score-ranked modes, distance / corpus weight in vector mode.
    merge_score: float | None = None
    merge_distance: float | None = None
    # True when only a multi-search's `include` made this item a candidate.
    included: bool = False
    # Set only when the request asked for them (internal.vectord.shaping.shaped).
    highlight: dict[str, list[str]] | msgspec.UnsetType = msgspec.UNSET
    highlight_kind: dict[str, str] | msgspec.UnsetType = msgspec.UNSET
    group: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    recency_factor: float | msgspec.UnsetType = msgspec.UNSET
    # A multi-search's `features: true` (the learned ranker's values; matrixd asks).
    features: HitFeatures | msgspec.UnsetType = msgspec.UNSET


class DowngradeOption(msgspec.Struct, forbid_unknown_fields=True):
    """Per-request downgrade conditions, laid over `[matrixd] downgrade_*` (0 / false: off)."""

    max_distance: float | None = None
    min_score: float | None = None
    max_age_days: float | None = None
    disputed: bool | None = None


class ObservationIn(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    reference_time: str | None = None  # ISO 8601: when it was said ("yesterday" is the day before)
    speaker: str | None = None
