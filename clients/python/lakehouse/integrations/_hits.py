"""What both retrievers share: the search options they pass, and a hit as metadata."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from lakehouse.client import Client
from lakehouse.wire.responses import MatrixHit, MatrixSearchResponse


def search_options(corpora: list[str] | None, k: int, mode: str | None,
                   filter: Mapping[str, Any] | None, use_playbook: bool,
                   search_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of Client.search; search_kwargs holds any other option of it."""
    return {"corpora": corpora, "k": k, "mode": mode, "filter": filter,
            "use_playbook": use_playbook, **search_kwargs}


async def search_async(client: Client, query: str, options: Mapping[str, Any]
                       ) -> MatrixSearchResponse:
    """Client.search, awaited without blocking the caller's event loop: the request runs
    on the client's own loop."""
    return await asyncio.wrap_future(client._submit(client._async.search(query, **options)))


def hit_key(hit: MatrixHit) -> str:
    """A hit's id across corpora: `corpus/id`."""
    return f"{hit.corpus}/{hit.id}"


def hit_metadata(hit: MatrixHit) -> dict[str, Any]:
    """Where a hit came from and how it scored: corpus, id, rank, score (the mode's own,
    None in vector and keyword modes), distance, each branch's score and rank (`scores`,
    `ranks`: vector, lexical, symbolic), title, tags, the item's own `metadata`."""
    return {
        "corpus": hit.corpus, "id": hit.id, "rank": hit.rank, "score": hit.score,
        "distance": hit.distance, "scores": dict(hit.scores), "ranks": dict(hit.ranks),
        "title": hit.title, "tags": list(hit.tags), "metadata": hit.metadata,
        "updated_at": hit.updated_at.isoformat(),
    }


def relevance(hit: MatrixHit) -> float | None:
    """One number, larger is better, for frameworks that want a score: the cross-corpus
    ranking score, else the mode's score, else the vector similarity."""
    if hit.merge_score is not None:
        return hit.merge_score
    if hit.score is not None:
        return hit.score
    return hit.scores.get("vector")
