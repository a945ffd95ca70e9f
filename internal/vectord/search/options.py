"""The request-wide options of a search (`Options`, checked once by validation.check)
and one corpus's hybrid candidates (`Candidates`, private to the search paths: the
search_*.py modules, search/candidates.py and feedback). Their own module so that those and
search_reads import them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from internal.api.ranker import QueryStats
from internal.api.vectord import SearchRequest
from internal.vectord.search import prf, query_vectors


@dataclass
class RankerAsk:
    """A search asked for the learned ranker's values (`features: true`, hybrid): the
    search sets the question's stats here (search/ranker_values.py), the route answers them."""

    stats: QueryStats | None = None


@dataclass(frozen=True)
class Options:
    """The request-wide options of a search, checked once before any corpus is touched."""

    req: SearchRequest
    where: sql.Composable
    params: dict[str, Any]
    filtered: bool
    text: str
    k1: float
    b: float
    field_weights: dict[str, float]
    n: int  # hybrid: candidates per branch
    rrf_k: int
    method: str
    fusion_weights: dict[str, float] | None
    symbolic: sql.Composable | None
    sym_params: dict[str, Any] = field(default_factory=dict)
    ef_search: int = 100
    prf: prf.Settings = prf.DEFAULT
    # In-memory BM25: a repeated text may score from the cache and check its versions in
    # the statement that reads the hits (False once that check found one moved).
    trust_cache: bool = True
    ranker: RankerAsk | None = None


@dataclass
class Candidates:
    vec: list[tuple[str, float]]  # (key, distance), nearest first
    lex: list[tuple[str, float]]  # (key, BM25), best first
    sym: dict[str, float]  # key -> share of preferences met
    # `include` items, scored in the branches their natural lists missed.
    extra_vec: list[tuple[str, float]] = field(default_factory=list)
    extra_lex: list[tuple[str, float]] = field(default_factory=list)
    included: set[str] = field(default_factory=set)  # keys found by no branch on their own
    space: int = query_vectors.PLAIN  # the embedding space its vector candidates are from
