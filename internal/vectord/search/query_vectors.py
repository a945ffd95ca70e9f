"""Embedding spaces of a search: which query vector each corpus is searched with (no I/O).

A corpus records the model that embedded its items (its label) and its dimension. The
vectors of different models do not share a scale, so a search over corpora of several
models searches each space with the query embedded by that space's model, and the
fusion treats the spaces' vector lists as separate branches (fusion.vector_spaces).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from internal.api.vectord import Corpus, QueryVector

# The space of the request's own query_vector (the others are indexes of query_vectors).
PLAIN = -1


@dataclass(frozen=True)
class Choice:
    """The vector a corpus is searched with and its space; vector None: none fits."""

    vector: list[float] | None
    space: int
    skipped: str | None = None  # why no vector fits (query_vectors given)


def choose(corpus: Corpus, query_vector: list[float] | None,
           query_vectors: Sequence[QueryVector] | None) -> Choice:
    """The query vector for corpus.

    Without query_vectors: the request's query_vector, whatever it is (a wrong dimension
    is the caller's 400, as ever). With them: the vector of the model the corpus records;
    a corpus that records none takes query_vector when its dimension fits; else none fits
    and the corpus's vector branch is skipped with the reason.
    """
    if query_vectors is None:
        return Choice(query_vector, PLAIN)
    if corpus.model is not None:
        for i, qv in enumerate(query_vectors):
            if qv.model == corpus.model:
                if len(qv.vector) != corpus.dim:
                    return Choice(None, i, f"the query embedded by model {corpus.model!r} has "
                                           f"{len(qv.vector)} dimensions, the corpus {corpus.dim}")
                return Choice(qv.vector, i)
        return Choice(None, PLAIN, f"no query vector for its model {corpus.model!r}")
    if query_vector is not None and len(query_vector) == corpus.dim:
        return Choice(query_vector, PLAIN)
    return Choice(None, PLAIN, f"it records no model and its dimension {corpus.dim} fits "
                               "no query vector")


# The cost model choosing between a space's shared graph and the corpora's own graphs,
# calibrated on the shared-index prototype (docs/decisions/0007-shared-vector-index.md) (8,041 vectors, 16 corpora, top 100): a
# filtered scan of the shared graph costs about 1/share of an unfiltered one (8 of 16
# corpora: 1.5x; one corpus holding 1/116 of a space: 16x), the own graphs about half a
# scan per corpus (16 corpora: 3.7x one). So the shared graph serves n corpora holding a
# share s of the space when 1/s <= n/2: s >= 2/n.
CORPORA_PER_SCAN = 2.0


def use_shared(searched: Sequence[float], space: Sequence[float]) -> bool:
    """Whether to read the shared index for the searched corpora of one space.

    searched, space: the item counts (estimates, -1 when not known yet) of the searched
    corpora and of every corpus attached to the space. One corpus reads its own graph;
    with a count unknown, the share of corpora stands in for the share of items."""
    n = len(searched)
    if n < 2:
        return False
    needed = min(1.0, CORPORA_PER_SCAN / n)
    if all(x >= 0 for x in space):
        total = sum(space)
        return total <= 0 or sum(searched) >= needed * total
    return n >= needed * len(space)
