"""Run a data set's judged queries through vectord in each search mode and score them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from internal.api.vectord import SearchRequest
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common.errors import InvalidArgument, LakehouseError
from internal.common.web import validation_field
from internal.evaluation.beir import Dataset
from internal.evaluation.metrics import evaluate
from internal.evaluation.modes import table_modes
from lakehouse.wire.modes import FUSIONS, MODES

log = structlog.get_logger()

DEPTH = 100  # hits per query: Recall@100 needs 100
QUERY_EMBED_BATCH = 128
CONCURRENCY = 4


@dataclass(frozen=True)
class ModeResult:
    mode: str
    metrics: dict[str, float]
    seconds: float
    queries: int
    error: str | None = None

    @property
    def ms_per_query(self) -> float:
        return 1000 * self.seconds / self.queries if self.queries else 0.0


@dataclass(frozen=True)
class SearchOptions:
    """Extra request fields, e.g. {"rrf_k": 60, "weights": {...}, "candidates": 100}."""

    hybrid: Mapping[str, Any] = field(default_factory=dict)


def search_body(mode: str, text: str, vector: list[float], options: SearchOptions) -> dict[str, Any]:
    """The vectord search request for one query in one table mode."""
    api_mode, fusion = table_modes()[mode]
    spec = MODES[api_mode]
    body: dict[str, Any] = {"mode": api_mode, "k": DEPTH}
    if spec.needs != "text":
        body["query_vector"] = vector
    if spec.needs != "vector":
        body["query_text"] = text
    if spec.fusion:
        if fusion is not None:
            body["fusion"] = fusion
        tuning = {key for f in FUSIONS.values() for key in f.tuned_by}
        for key, value in options.hybrid.items():
            # A method named takes the options that tune it (rrf: rrf_k; the score
            # fusions: weights), not another's, nor `fusion`; the mode that names none
            # (vectord's default method) takes every option given.
            if fusion is not None and (key == "fusion" or (
                    key in tuning and key not in FUSIONS[fusion].tuned_by)):
                continue
            body[key] = value
    return body


def request(body: Mapping[str, Any]) -> SearchRequest:
    """A search body as vectord's request; an option out of its range is the 400 vectord
    would answer, naming it (the mode reports it as its failure)."""
    try:
        return msgspec.convert(body, SearchRequest)
    except msgspec.ValidationError as exc:
        field = validation_field(str(exc))
        raise InvalidArgument(f"{field or 'body'}: {exc}", field=field) from None


async def embed_queries(ec: EmbedClient, queries: Mapping[str, str], model: str
                        ) -> dict[str, list[float]]:
    """Query vectors (input_type query), in batches."""
    qids = list(queries)
    out: dict[str, list[float]] = {}
    for i in range(0, len(qids), QUERY_EMBED_BATCH):
        chunk = qids[i:i + QUERY_EMBED_BATCH]
        emb = await ec.embed([queries[q] for q in chunk], input_type="query", model=model)
        out.update(zip(chunk, emb.vectors, strict=True))
    return out


async def search_all(vc: VectordClient, corpus: str, dataset: Dataset, mode: str,
                     vectors: Mapping[str, list[float]], options: SearchOptions
                     ) -> dict[str, list[str]]:
    """Every judged query in one mode: query id -> distinct doc ids, best first."""
    gate = asyncio.Semaphore(CONCURRENCY)
    run: dict[str, list[str]] = {}

    async def one(qid: str) -> None:
        req = request(search_body(mode, dataset.queries[qid], vectors[qid], options))
        async with gate:
            out = await vc.search(corpus, req)
        seen: dict[str, None] = {}
        for hit in out.hits:
            seen.setdefault(hit.id, None)
        run[qid] = list(seen)

    await asyncio.gather(*(one(q) for q in dataset.queries))
    return run


async def run_mode(vc: VectordClient, corpus: str, dataset: Dataset, mode: str,
                   vectors: Mapping[str, list[float]], options: SearchOptions) -> ModeResult:
    """Every judged query in one mode; the first failure is reported, not hidden."""
    started = time.perf_counter()
    try:
        run = await search_all(vc, corpus, dataset, mode, vectors, options)
    except LakehouseError as exc:
        log.error("eval_mode_failed", mode=mode, error=exc.message)
        return ModeResult(mode, {}, time.perf_counter() - started, len(dataset.queries),
                          error=f"{exc.code}: {exc.message}")
    seconds = time.perf_counter() - started
    return ModeResult(mode, evaluate(run, dataset.qrels), seconds, len(dataset.queries))


async def run_modes(vc: VectordClient, ec: EmbedClient, corpus: str, dataset: Dataset,
                    modes: Sequence[str], model: str, options: SearchOptions | None = None
                    ) -> tuple[list[ModeResult], float]:
    """Each mode's result, and the seconds spent embedding the queries (once, shared)."""
    options = options or SearchOptions()
    started = time.perf_counter()
    vectors = await embed_queries(ec, dataset.queries, model)
    embed_seconds = time.perf_counter() - started
    results = []
    for mode in modes:
        result = await run_mode(vc, corpus, dataset, mode, vectors, options)
        log.info("eval_mode_done", mode=mode, seconds=round(result.seconds, 2), **result.metrics)
        results.append(result)
    return results, embed_seconds
