"""The search modes and the fusion methods, each declared once (I/O-free).

A mode's entry says what a search in it needs (query text, a query vector, or either),
whether matrixd embeds the question for it, how its hits merge across corpora (by
distance, by score, newest first) and whether it takes the fusion's options. Everything
that knows of modes reads this table: the request checks (internal.api.search), matrixd
(embedding, the merge's ranking key), vectord (its search per mode, registered beside
each mode's code in internal/vectord/search/modes/, and the shaping), the CLI's
`--mode` choices, smart search, the evaluator and the OpenAPI document. A mode's name
is a checked string (lakehouse.wire.search.ModeName), not a Literal, so a mode
registered at run time (a test's toy mode) is accepted everywhere at once. No import
but the standard library: the `lakehouse` command's --help reads it.

The fusion methods of hybrid search are a table the same way: each entry names the
request options that tune it; vectord registers the function (internal.vectord.search.fusion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Need = Literal["text", "vector", "either"]  # what the query must give
Merge = Literal["distance", "score", "newest"]  # how hits of several corpora merge



@dataclass(frozen=True)
class ModeSpec:
    """One search mode, as every layer reads it."""

    name: str
    needs: Need
    # matrixd embeds the query text for it (when the caller gave no vector); a mode
    # that does not is never held up by embedd.
    embeds: bool
    merge: Merge
    fusion: bool  # takes fusion, rrf_k, weights, candidates, prefer and prf
    summary: str = ""
    # The mode searched instead when the question cannot be embedded (embedd down), for
    # a mode that can do without a vector; None: the search fails.
    fallback: str | None = None
    # The learned ranker orders its fused candidates: vectord gives each hit's features
    # (a multi-search's `features: true`) and matrixd's model scores them.
    ranked: bool = False

    @property
    def by_distance(self) -> bool:
        """Its hits rank by distance, smaller first (merge_distance), not by merge_score."""
        return self.merge == "distance"


@dataclass(frozen=True)
class FusionSpec:
    """One fusion method of hybrid search: the request options that tune it."""

    name: str
    tuned_by: tuple[str, ...]
    summary: str = ""


MODES: dict[str, ModeSpec] = {}
FUSIONS: dict[str, FusionSpec] = {}

# The mode of a request that names none: hybrid for a text query, else vector.
TEXT_DEFAULT = "hybrid"
VECTOR_DEFAULT = "vector"
# The fusion of a mode that fuses when the request names none (docs/decisions/0038-default-hybrid-search.md).
DEFAULT_FUSION = "weighted"


def register_mode(spec: ModeSpec) -> ModeSpec:
    """Add a mode (a name taken already is an error: one declaration per mode)."""
    if spec.name in MODES:
        raise ValueError(f"mode {spec.name!r} is registered already")
    MODES[spec.name] = spec
    return spec


def register_fusion(spec: FusionSpec) -> FusionSpec:
    """Add a fusion method (a name taken already is an error)."""
    if spec.name in FUSIONS:
        raise ValueError(f"fusion {spec.name!r} is registered already")
    FUSIONS[spec.name] = spec
    return spec


def default_mode(has_text: bool) -> ModeSpec:
    return MODES[TEXT_DEFAULT if has_text else VECTOR_DEFAULT]


register_mode(ModeSpec("vector", needs="vector", embeds=True, merge="distance", fusion=False,
                       summary="nearest by meaning (the query's embedding)"))
register_mode(ModeSpec("keyword", needs="text", embeds=False, merge="newest", fusion=False,
                       summary="items holding the words as typed: a title or id that is "
                               "the text first, then whole words, newest first"))
register_mode(ModeSpec("lexical", needs="text", embeds=False, merge="score", fusion=False,
                       summary="ranked words (BM25)"))
register_mode(ModeSpec("hybrid", needs="either", embeds=True, merge="score", fusion=True,
                       summary="meaning and words together, fused", fallback="lexical",
                       ranked=True))

register_fusion(FusionSpec("rrf", tuned_by=("rrf_k",),
                           summary="reciprocal rank fusion: w / (rrf_k + rank)"))
register_fusion(FusionSpec("weighted", tuned_by=("weights",),
                           summary="min-max normalised scores, weighted"))
register_fusion(FusionSpec("dbsf", tuned_by=("weights",),
                           summary="scores normalised by mean ± 3 std, weighted"))
