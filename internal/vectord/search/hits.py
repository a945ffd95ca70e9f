"""Rows of the items table -> search hits (docs/API.md), one function per branch."""

from __future__ import annotations

from typing import Any

from internal.api.vectord import Corpus, Hit


def hit(corpus: Corpus, row: dict[str, Any], *, distance: float | None = None,
        score: float | None = None, ranks: dict[str, int | None] | None = None,
        scores: dict[str, float | None] | None = None,
        matched_layers: list[str] | None = None) -> Hit:
    all_ranks: dict[str, int | None] = {"vector": None, "lexical": None, **(ranks or {})}
    if matched_layers is None:  # a layer matched when the hit has a rank in it
        matched_layers = [layer for layer, r in all_ranks.items() if r is not None]
    return Hit(
        id=row["id"], corpus=corpus.name, distance=distance, score=score,
        ranks=all_ranks,
        scores={"vector": None, "lexical": None, **(scores or {})},
        text=row["text"], title=row["title"], tags=list(row["tags"] or []),
        metadata=row["metadata"] or {}, language=row["language"], updated_at=row["updated_at"],
        matched_layers=matched_layers)


def similarity(metric: str, distance: float) -> float:
    """Larger is nearer: cosine similarity, inner product, or negated L2 distance."""
    if metric == "cosine":
        return 1.0 - distance
    return -distance  # ip: pgvector's <#> is the negated inner product


def from_vector_rows(corpus: Corpus, rows: list[dict[str, Any]]) -> list[Hit]:
    """Vector-branch rows (best first, each with `distance`) as hits ranked from 1.

    hit() spelled out for the one branch every vector search takes (a third of the cost).
    """
    out = []
    name, metric = corpus.name, corpus.metric
    for rank, row in enumerate(rows, start=1):
        d = float(row["distance"])
        tags = row["tags"]
        out.append(Hit(
            id=row["id"], corpus=name, distance=d, score=None,
            ranks={"vector": rank, "lexical": None},
            scores={"vector": similarity(metric, d), "lexical": None},
            text=row["text"], title=row["title"], tags=list(tags) if tags else [],
            metadata=row["metadata"] or {}, language=row["language"],
            updated_at=row["updated_at"], matched_layers=["vector"]))
    return out


def from_lexical_row(corpus: Corpus, row: dict[str, Any], score: float,
                     rank: int | None) -> Hit:
    """A BM25 hit (rank None: an `include` item, matched in no layer): hit() spelled out
    for the in-memory lexical search, as from_vector_rows for the vector branch."""
    tags = row["tags"]
    return Hit(
        id=row["id"], corpus=corpus.name, distance=None, score=score,
        ranks={"vector": None, "lexical": rank},
        scores={"vector": None, "lexical": score},
        text=row["text"], title=row["title"], tags=list(tags) if tags else [],
        metadata=row["metadata"] or {}, language=row["language"],
        updated_at=row["updated_at"], matched_layers=[] if rank is None else ["lexical"])


def from_keyword_rows(corpus: Corpus, rows: list[dict[str, Any]]) -> list[Hit]:
    """Keyword rows, the most exact first, then newest: no distance, no score; the
    match's exactness (storage/searches.py's KEYWORD_SEARCH) as the `keyword` layer's."""
    out = []
    for row in rows:
        h = hit(corpus, row)
        h.scores = {"keyword": float(row["exactness"])}
        out.append(h)
    return out
