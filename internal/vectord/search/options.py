"""A search as the engine works on it (`Options`, checked once by validation.check from the
request, which nothing reads after it) and one corpus's hybrid candidates (`Candidates`,
keyed by `union_merge.Key`). Their own module so that the search paths and the reads
import them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from internal.api.ranker import QueryStats
from internal.api.vectord import QueryVector
from internal.vectord.search import prf, query_vectors
from internal.vectord.search.union_merge import Key
from lakehouse.wire.modes import ModeSpec


@dataclass
class RankerAsk:
    """A search asked for the learned ranker's values (`features: true`, hybrid): the
    search sets the question's stats here (search/ranker_values.py), the route answers them."""

    stats: QueryStats | None = None


@dataclass
class Notes:
    """What a search learns on its way and its answer tells: the question as corrected
    (`did_you_mean`, lexical/typos.py)."""

    did_you_mean: str | None = None
    corrected: dict[str, str] = field(default_factory=dict)  # lexeme -> its correction


@dataclass(frozen=True)
class Options:
    """The request-wide options of a search, checked once before any corpus is touched."""

    mode: ModeSpec
    k: int
    text: str  # what the mode searches with ("" for none; not stripped: a cache key)
    query_text: str  # the request's own text, whatever the mode (highlights read it)
    query_vector: list[float] | None
    query_vectors: list[QueryVector] | None
    # The query's regconfig when the request names a language, else None (each corpus's).
    language: str | None
    where: sql.Composable
    params: dict[str, Any]
    filtered: bool
    k1: float
    b: float
    field_weights: dict[str, float]
    n: int  # hybrid: candidates per branch
    rrf_k: int
    method: str
    fusion_weights: dict[str, float] | None
    symbolic: sql.Composable | None
    sym_params: dict[str, Any] = field(default_factory=dict)
    ef_search: int | None = None  # None: each corpus's own (its index settings)
    prf: prf.Settings = prf.DEFAULT
    # In-memory BM25: a repeated text may score from the cache and check its versions in
    # the statement that reads the hits (False once that check found one moved).
    trust_cache: bool = True
    ranker: RankerAsk | None = None
    notes: Notes = field(default_factory=Notes)


@dataclass
class Candidates:
    vec: list[tuple[Key, float]]  # (key, distance), nearest first
    lex: list[tuple[Key, float]]  # (key, BM25), best first
    sym: dict[Key, float]  # key -> share of preferences met
    # `include` items, scored in the branches their natural lists missed.
    extra_vec: list[tuple[Key, float]] = field(default_factory=list)
    extra_lex: list[tuple[Key, float]] = field(default_factory=list)
    included: set[Key] = field(default_factory=set)  # keys found by no branch on their own
    space: int = query_vectors.PLAIN  # the embedding space its vector candidates are from
