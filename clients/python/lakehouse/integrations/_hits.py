"""What the integrations share: the search options they pass, a hit as metadata, the
client's calls awaited on its own loop, an answer's cited hits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from lakehouse.client import Client
from lakehouse.wire.answer import AnswerEvent, AnswerResponse, Citation
from lakehouse.wire.responses import MatrixHit, MatrixSearchResponse


def search_options(corpora: list[str] | None, k: int, mode: str | None,
                   filter: Mapping[str, Any] | None, use_playbook: bool,
                   search_kwargs: Mapping[str, Any], group_by: str | None = None
                   ) -> dict[str, Any]:
    """Keyword arguments of Client.search; search_kwargs holds any other option of it
    (highlight, facets, diversity, ...); group_by: one document per group."""
    grouped = {"group_by": group_by} if group_by is not None else {}
    return {"corpora": corpora, "k": k, "mode": mode, "filter": filter,
            "use_playbook": use_playbook, **grouped, **search_kwargs}


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
    `ranks`: vector, lexical, symbolic), title, tags, the item's own `metadata`; with
    `highlight` asked, its fragments (`highlight`, `highlight_kind`); with `group_by`,
    the group's key and size (`group_key`, `group_count`)."""
    out = {
        "corpus": hit.corpus, "id": hit.id, "rank": hit.rank, "score": hit.score,
        "distance": hit.distance, "scores": dict(hit.scores), "ranks": dict(hit.ranks),
        "title": hit.title, "tags": list(hit.tags), "metadata": hit.metadata,
        "updated_at": hit.updated_at.isoformat(),
    }
    if isinstance(hit.highlight, dict):
        out["highlight"] = hit.highlight
        out["highlight_kind"] = hit.highlight_kind
    if isinstance(hit.group, dict):
        out["group_key"] = hit.group.get("key")
        out["group_count"] = hit.group.get("count")
    return out


def relevance(hit: MatrixHit) -> float | None:
    """One number, larger is better, for frameworks that want a score: the cross-corpus
    ranking score, else the mode's score, else the vector similarity."""
    if hit.merge_score is not None:
        return hit.merge_score
    if hit.score is not None:
        return hit.score
    return hit.scores.get("vector")


async def answer_async(client: Client, query: str, options: Mapping[str, Any]
                       ) -> AnswerResponse:
    """Client.answer, awaited on the client's own loop (as `search_async`)."""
    return await asyncio.wrap_future(client._submit(client._async.answer(query, **options)))


async def answer_events(client: Client, query: str, options: Mapping[str, Any]
                        ) -> AsyncIterator[AnswerEvent]:
    """Client.answer_stream's events, awaited one by one on the client's own loop."""
    agen = client._async.answer_stream(query, **options)
    try:
        while True:
            try:
                event = await asyncio.wrap_future(client._submit(agen.__anext__()))
            except StopAsyncIteration:
                return
            yield event
    finally:
        await asyncio.wrap_future(client._submit(agen.aclose()))


def cited_hits(citations: Sequence[Citation], hits: Sequence[MatrixHit]
               ) -> list[tuple[Citation, MatrixHit]]:
    """Each citation of an answer with the hit it cites, in marker order."""
    by_key = {(h.corpus, h.id): h for h in hits}
    return [(c, by_key[(c.corpus, c.id)]) for c in citations if (c.corpus, c.id) in by_key]


def citation_metadata(citation: Citation, hit: MatrixHit) -> dict[str, Any]:
    """A cited hit's metadata (hit_metadata) with the citation: its marker, the passage
    and its offsets in the item's text, the document it is part of."""
    return {**hit_metadata(hit), "marker": citation.marker, "passage": citation.passage,
            "start": citation.start, "end": citation.end,
            "document_id": citation.document_id}
