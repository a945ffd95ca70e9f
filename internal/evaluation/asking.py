"""Recording pairs and asking questions through matrixd, for `lakehouse eval --feedback-qrels`
(internal.evaluation.feedback) and its learned-ranker part (internal.evaluation.ranker_runs)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from internal.api.matrixd import RecordRequest
from internal.api.responses import PlaybookSummary
from internal.clients.matrixd import MatrixdClient
from internal.common.errors import NotFound
from internal.evaluation.runner import DEPTH, SearchOptions, search_body

CONCURRENCY = 4


@dataclass
class Side:
    """One mode, with or without the playbook: the run and what the playbook did per query."""

    run: dict[str, list[str]] = field(default_factory=dict)
    entries: dict[str, int] = field(default_factory=dict)
    boosted: dict[str, int] = field(default_factory=dict)
    recalled: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    lookup_ms: list[float] = field(default_factory=list)
    ranked: int = 0  # answers the learned ranker ordered


async def record_all(matrix: MatrixdClient, corpus: str, playbook: str,
                      pairs: Sequence[tuple[str, str]], queries: Mapping[str, str]
                      ) -> tuple[int, int]:
    """Record every pair (score 1); a doc missing from the corpus is skipped and counted."""
    gate = asyncio.Semaphore(CONCURRENCY)
    skipped = 0

    async def one(qid: str, did: str) -> None:
        nonlocal skipped
        async with gate:
            try:
                await matrix.record(RecordRequest(
                    query_text=queries[qid], answer_id=did, answer_corpus=corpus, score=1.0,
                    playbook_corpus=playbook))
            except NotFound:  # the answer is not in the corpus
                skipped += 1

    await asyncio.gather(*(one(q, d) for q, d in pairs if queries.get(q, "").strip()))
    return len(pairs) - skipped, skipped


async def ask_both(matrix: MatrixdClient, corpus: str, playbook: str, mode: str,
                   queries: Mapping[str, str], vectors: Mapping[str, list[float]],
                   options: SearchOptions) -> tuple[Side, Side]:
    """Every query without and with the playbook, back to back (alternating which goes
    first), so that the load of the shared machine falls on both sides alike."""
    sides = (Side(), Side())
    gate = asyncio.Semaphore(CONCURRENCY)

    async def ask(qid: str, use_playbook: bool) -> None:
        body = search_body(mode, queries[qid], vectors[qid], options)
        # The query vector always goes along: matrixd then embeds nothing, in any mode.
        body.update({"corpora": [corpus], "k": DEPTH, "use_playbook": use_playbook,
                     "playbook_corpus": playbook, "query_text": queries[qid],
                     "query_vector": vectors[qid]})
        side = sides[use_playbook]
        t0 = time.perf_counter()
        out = await matrix.search(body)
        side.seconds += time.perf_counter() - t0
        seen: dict[str, None] = {}
        for hit in out.hits:
            seen.setdefault(hit.id, None)
        side.run[qid] = list(seen)
        pb = out.playbook or PlaybookSummary(corpus=playbook, entries=0)
        side.entries[qid] = pb.entries
        side.boosted[qid] = pb.boosted
        side.recalled[qid] = pb.recalled
        if pb.ms is not None:
            side.lookup_ms.append(pb.ms)

    async def both(i: int, qid: str) -> None:
        async with gate:
            for use in ((False, True) if i % 2 == 0 else (True, False)):
                await ask(qid, use)

    await asyncio.gather(*(both(i, q) for i, q in enumerate(queries)))
    return sides


async def ask_with(matrix: MatrixdClient, corpus: str, playbook: str, mode: str,
                   queries: Mapping[str, str], vectors: Mapping[str, list[float]],
                   options: SearchOptions) -> Side:
    """Every query with the playbook only (what the playbook's model, if any, ranks)."""
    side = Side()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def ask(qid: str) -> None:
        body = search_body(mode, queries[qid], vectors[qid], options)
        body.update({"corpora": [corpus], "k": DEPTH, "use_playbook": True,
                     "playbook_corpus": playbook, "query_text": queries[qid],
                     "query_vector": vectors[qid]})
        async with gate:
            t0 = time.perf_counter()
            out = await matrix.search(body)
            side.seconds += time.perf_counter() - t0
        side.run[qid] = list(dict.fromkeys(h.id for h in out.hits))
        if out.ranker is not None and out.ranker.applied:
            side.ranked += 1

    await asyncio.gather(*(ask(q) for q in queries))
    return side
