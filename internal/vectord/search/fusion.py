"""Fusion of the semantic, lexical and symbolic layers into one ranking (no I/O).

Inputs are the branches' candidate lists, best first, each with a score where larger
is better (callers turn a distance into a similarity first), plus the symbolic score
of each candidate (the share of soft preferences it matches) when preferences were
given. Every method returns the union of the candidates, best first:

- `rrf`: sum over layers of w / (k + rank), rank starting at 1 (Cormack et al. 2009).
- `weighted`: convex combination of per-layer min-max normalised scores.
- `dbsf`: like weighted, but each layer is normalised by mean ± 3 standard deviations
  of its scores and clipped to [0, 1] (distribution-based score fusion, as in Qdrant).

A method is one function with `Method`'s signature, registered by name (`method`); the
names and the options that tune each are declared in lakehouse.wire.modes (FUSIONS),
which the request check reads. A candidate's id is any hashable key (the search's are
(item id, corpus position), union_merge.Key).

A candidate missing from a layer contributes 0 for it. Weights are normalised over the
layers in play (a branch with no candidates, or no preferences, drops out), so an empty
branch leaves the other branch's order unchanged.

Corpora embedded by different models are different vector spaces: their distances do not
share a scale. The vector layer is then given as one list per space (`vector_spaces`):
ranks and normalisation are taken within each space's list, each weighted as the vector
layer, and a candidate (which belongs to one space) is scored by its own space's list.
With one space this is the plain vector branch.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from internal.common.registries import registrar
from lakehouse.wire.modes import DEFAULT_FUSION, FUSIONS
from lakehouse.wire.search import LAYERS

VECTOR, LEXICAL, SYMBOLIC = LAYERS

# Defaults tuned on SciFact train, Cranfield dev and CISI dev (docs/decisions/0038-default-hybrid-search.md):
# weighted with vector = lexical was the only setting within reach of the best on all
# three (SciFact +0.031 nDCG@10 over BM25); the symbolic layer keeps its 0.2.
DEFAULT_METHOD = DEFAULT_FUSION  # hybrid's fusion when a request names none
DEFAULT_RRF_K = 60  # the formula's classic k; [vectord] fusion_rrf_k (20) is what a search uses
DEFAULT_WEIGHTS: Mapping[str, float] = {VECTOR: 0.4, LEXICAL: 0.4, SYMBOLIC: 0.2}

Id = TypeVar("Id", bound=Hashable)  # a candidate's id
Branch = Sequence[tuple[Id, float]]  # (id, score), best first


class Fused(Generic[Id]):
    """One candidate after fusion: its fused score and what each layer said.

    What each layer said is read from the fusion's tables when asked for: a search
    builds one Fused per candidate (hundreds) and looks at the layers of ten. The tables
    are keyed by `at` (the candidate's ordinal in the fusion, an int: hashed for free,
    where a search's ids are (item id, position) tuples), else by the id."""

    __slots__ = ("_at", "_layers", "_ranks", "_raw", "id", "score")

    def __init__(self, id: Id, score: float, raw: Mapping[str, Mapping[Any, float]],
                 ranks: Mapping[str, Mapping[Any, int]], layers: Sequence[str],
                 at: int | None = None) -> None:
        self.id, self.score = id, score
        self._raw, self._ranks, self._layers = raw, ranks, layers
        self._at: Any = id if at is None else at

    @property
    def scores(self) -> dict[str, float | None]:
        """Raw score per layer (None: the layer did not find it)."""
        return {layer: self._raw[layer].get(self._at) for layer in self._layers}

    @property
    def ranks(self) -> dict[str, int | None]:
        """1-based rank per layer (None: the layer did not find it)."""
        return {layer: self._ranks[layer].get(self._at) for layer in self._layers}

    @property
    def matched_layers(self) -> tuple[str, ...]:
        return tuple(layer for layer in self._layers if self._at in self._ranks[layer])

    def __repr__(self) -> str:
        return f"Fused({self.id!r}, {self.score!r}, ranks={self.ranks!r})"


def normalise_weights(weights: Mapping[str, float], layers: Sequence[str]) -> dict[str, float]:
    """Weights of the given layers scaled to sum to 1 (equal when they sum to 0); each a
    layer's, >= 0 (checked with the request: internal.api.search.layer_weights)."""
    picked = {name: float(weights.get(name, 0.0)) for name in layers}
    total = sum(picked.values())
    if total <= 0:
        return {name: 1.0 / len(layers) for name in layers} if layers else {}
    return {name: w / total for name, w in picked.items()}


def minmax(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1] by the list's min and max; all-equal scores all become 1."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def dbsf_normalise(scores: Sequence[float]) -> list[float]:
    """Scale so mean - 3σ → 0 and mean + 3σ → 1, clipped; zero spread gives 0.5."""
    if not scores:
        return []
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    if std == 0:
        return [0.5] * n
    lo = mean - 3 * std
    return [min(1.0, max(0.0, (s - lo) / (6 * std))) for s in scores]


def _symbolic_ranks(symbolic: Mapping[int, float]) -> dict[int, int]:
    """Competition ranks (1, 2, 2, 4) of the candidates matching any preference."""
    ordered = sorted((s for s in symbolic.values() if s > 0), reverse=True)
    first: dict[float, int] = {}
    for i, s in enumerate(ordered, 1):
        first.setdefault(s, i)
    return {at: first[s] for at, s in symbolic.items() if s > 0}


def with_spaces(branches: Mapping[str, Branch[Id]], vector_spaces: Sequence[Branch[Id]] | None
                ) -> tuple[dict[str, Branch[Id]], list[Branch[Id]]]:
    """The branches with the vector layer as its list of spaces (one list when not split)."""
    out = dict(branches)
    if vector_spaces is None:
        return out, [out[VECTOR]] if VECTOR in out else []
    if VECTOR in out:
        raise ValueError("give the vector layer as a branch or as vector_spaces, not both")
    spaces = [s for s in vector_spaces if s]
    if spaces:
        out[VECTOR] = [r for s in spaces for r in s]
    return out, spaces


Layers = dict[str, dict[int, float]]  # layer -> candidate ordinal -> its raw score
Ranks = dict[str, dict[int, int]]  # layer -> candidate ordinal -> its 1-based rank


def _collect(branches: Mapping[str, Branch[Id]], symbolic: Mapping[Id, float] | None,
             vector_spaces: Sequence[Branch[Id]] | None = None
             ) -> tuple[list[Id], Layers, Ranks, list[list[int]]]:
    """The union of candidate ids (first-seen order: a candidate's ordinal is its place
    here), each layer's raw scores and ranks by ordinal (the vector layer's ranked within
    each space), and the vector layer's ordinals per space."""
    for name in branches:
        if name not in (VECTOR, LEXICAL):
            raise ValueError(f"unknown branch {name!r}")
    flat, spaces = with_spaces(branches, vector_spaces)
    index: dict[Id, int] = {}  # the union, in first-seen order
    raw: Layers = {}
    ranks: Ranks = {}
    groups: list[list[int]] = []
    lists: list[tuple[str, Branch[Id]]] = [(VECTOR, s) for s in spaces]
    lists += [(name, b) for name, b in flat.items() if name != VECTOR]
    for name, hits in lists:
        layer_raw = raw.setdefault(name, {})
        layer_ranks = ranks.setdefault(name, {})
        group: list[int] = []
        for rank, (cid, score) in enumerate(hits, 1):
            at = index.get(cid)
            if at is None:
                at = index[cid] = len(index)
            elif at in layer_raw:
                continue  # keep a duplicate's best (first) rank
            layer_raw[at] = float(score)
            layer_ranks[at] = rank
            group.append(at)
        if name == VECTOR:
            groups.append(group)
    if symbolic is not None:
        raw[SYMBOLIC] = {at: float(symbolic.get(cid, 0.0)) for cid, at in index.items()}
        ranks[SYMBOLIC] = _symbolic_ranks(raw[SYMBOLIC])
    return list(index), raw, ranks, groups


def _finish(ids: list[Id], fused: Sequence[float], raw: Layers, ranks: Ranks,
            limit: int | None = None) -> list[Fused[Id]]:
    """Best fused score first; ties by the best rank in any layer, then first seen. limit:
    only the first `limit` of that list (a search that reads ten of two hundred)."""
    best = [1 << 30] * len(ids)
    for layer_ranks in ranks.values():
        for at, rank in layer_ranks.items():
            if rank < best[at]:
                best[at] = rank
    # (-score, best rank, ordinal, id): no two rows are equal (the ordinal differs), so
    # the ids are never compared, and nsmallest(n, rows) is sorted(rows)[:n].
    rows = zip([-f for f in fused], best, range(len(ids)), ids, strict=True)
    keyed = (sorted(rows) if limit is None or limit >= len(ids)
             else heapq.nsmallest(max(limit, 0), rows))
    layers = tuple(layer for layer in LAYERS if layer in raw)
    return [Fused(cid, -neg, raw, ranks, layers, at) for neg, _, at, cid in keyed]


def _active(raw: Layers, symbolic: Mapping[Id, float] | None) -> list[str]:
    layers = [name for name in (VECTOR, LEXICAL) if raw.get(name)]
    if symbolic is not None and layers:
        layers.append(SYMBOLIC)
    return layers


class Method(Protocol):
    """A fusion method: the branches' lists (the vector layer possibly split by embedding
    space) and the symbolic scores -> every candidate, best first (the first `limit`)."""

    def __call__(self, branches: Mapping[str, Branch[Id]], *, k: int = DEFAULT_RRF_K,
                 weights: Mapping[str, float] | None = None,
                 symbolic: Mapping[Id, float] | None = None,
                 vector_spaces: Sequence[Branch[Id]] | None = None,
                 limit: int | None = None) -> list[Fused[Id]]: ...


METHODS: dict[str, Method] = {}
# `@method("<name>")`: the decorated function is that fusion method (in FUSIONS).
method = registrar(METHODS, FUSIONS, "fusion")


@method("rrf")
def rrf(branches: Mapping[str, Branch[Id]], *, k: int = DEFAULT_RRF_K,
        weights: Mapping[str, float] | None = None,
        symbolic: Mapping[Id, float] | None = None,
        vector_spaces: Sequence[Branch[Id]] | None = None,
        limit: int | None = None) -> list[Fused[Id]]:
    """Reciprocal Rank Fusion; symbolic ranks count candidates matching a preference.

    Without weights every layer counts alike (the classic formula); with weights each
    term is scaled by the layer's normalised weight. k: rrf_k (>= 1, the request's range).
    """
    ids, raw, ranks, _ = _collect(branches, symbolic, vector_spaces)
    layers = _active(raw, symbolic)
    w = normalise_weights(weights, layers) if weights is not None else dict.fromkeys(layers, 1.0)
    fused = [sum(w[layer] / (k + ranks[layer][at]) for layer in layers if at in ranks[layer])
             for at in range(len(ids))]
    return _finish(ids, fused, raw, ranks, limit)


def _normalised_fusion(branches: Mapping[str, Branch[Id]], symbolic: Mapping[Id, float] | None,
                       weights: Mapping[str, float], scale: Callable[[Sequence[float]], list[float]],
                       vector_spaces: Sequence[Branch[Id]] | None = None,
                       limit: int | None = None) -> list[Fused[Id]]:
    ids, raw, ranks, groups = _collect(branches, symbolic, vector_spaces)
    layers = _active(raw, symbolic)
    w = normalise_weights(weights, layers)
    norm: Layers = {}
    for layer in layers:
        if layer == SYMBOLIC:
            # A share of preferences is already on [0, 1] and comparable across queries.
            norm[layer] = raw[layer]
            continue
        norm[layer] = {}
        for group in groups if layer == VECTOR else [list(raw[layer])]:
            values = [raw[layer][at] for at in group]
            norm[layer].update(zip(group, scale(values), strict=True))
    # Each candidate's sum, layer by layer in this order (as sum() over the layers would
    # add them; a layer that did not find it adds an exact 0.0, so it is left out).
    fused = [0.0] * len(ids)
    for layer in layers:
        wl = w[layer]
        for at, v in norm[layer].items():
            fused[at] += wl * v
    return _finish(ids, fused, raw, ranks, limit)


@method("weighted")
def weighted(branches: Mapping[str, Branch[Id]], *, k: int = DEFAULT_RRF_K,
             weights: Mapping[str, float] | None = None,
             symbolic: Mapping[Id, float] | None = None,
             vector_spaces: Sequence[Branch[Id]] | None = None,
             limit: int | None = None) -> list[Fused[Id]]:
    """Convex combination of min-max normalised layer scores (weights None: the default)."""
    return _normalised_fusion(branches, symbolic, weights or DEFAULT_WEIGHTS, minmax,
                              vector_spaces, limit)


@method("dbsf")
def dbsf(branches: Mapping[str, Branch[Id]], *, k: int = DEFAULT_RRF_K,
         weights: Mapping[str, float] | None = None,
         symbolic: Mapping[Id, float] | None = None,
         vector_spaces: Sequence[Branch[Id]] | None = None,
         limit: int | None = None) -> list[Fused[Id]]:
    """Distribution-based score fusion: mean ± 3σ normalisation, then weighted sum."""
    return _normalised_fusion(branches, symbolic, weights or DEFAULT_WEIGHTS, dbsf_normalise,
                              vector_spaces, limit)


def fuse(name: str, branches: Mapping[str, Branch[Id]], *, k: int = DEFAULT_RRF_K,
         weights: Mapping[str, float] | None = None,
         symbolic: Mapping[Id, float] | None = None,
         vector_spaces: Sequence[Branch[Id]] | None = None,
         limit: int | None = None) -> list[Fused[Id]]:
    """The method registered as `name`; limit: the best `limit` only."""
    fn = METHODS.get(name)
    if fn is None:
        raise ValueError(f"fusion: unknown method {name!r}; expected one of {', '.join(METHODS)}")
    return fn(branches, k=k, weights=weights, symbolic=symbolic, vector_spaces=vector_spaces,
              limit=limit)


assert set(METHODS) == set(FUSIONS), "every fusion method declared has its function"
