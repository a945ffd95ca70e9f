"""One evaluation end to end: daemons up, corpus ingested (or reused), modes scored."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common.auth import service_headers
from internal.config import Config
from internal.evaluation import beir, crossval
from internal.evaluation.ingest import Progress, ingest
from internal.evaluation.metrics import ndcg10_per_query
from internal.evaluation.modes import table_modes
from internal.evaluation.report import Report
from internal.evaluation.runner import SearchOptions, embed_queries, run_modes, search_all
from internal.evaluation.services import services


@contextlib.asynccontextmanager
async def _clients(cfg: Config, in_process: bool, vectord_url: str | None,
                   embedd_url: str | None
                   ) -> AsyncIterator[tuple[Any, VectordClient, EmbedClient]]:
    """The daemons (configured, or started here) and a client of each."""
    async with services(cfg, in_process=in_process, vectord_url=vectord_url,
                        embedd_url=embedd_url) as ends, \
            aiohttp.ClientSession(headers=service_headers(cfg)) as session:
        # Embedding a large batch on a shared CPU can take minutes.
        yield (ends, VectordClient(session, ends.vectord_url, timeout=600.0),
               EmbedClient(session, ends.embedd_url, timeout=600.0))


async def evaluate_dataset(cfg: Config, folder: str | Path, split: str,
                           modes: Sequence[str] | None = None, *,
                           options: SearchOptions | None = None,
                           corpus: str | None = None, in_process: bool = False,
                           vectord_url: str | None = None, embedd_url: str | None = None,
                           progress: Progress | None = None,
                           cache_dir: Path | None = None) -> Report:
    """Load the data set, bring its corpus up to date, and score every mode.

    cache_dir keeps document vectors between runs (see ingest.VectorCache).
    """
    reports = await evaluate_datasets(cfg, [(folder, split)], modes, options=options,
                                      corpus=corpus, in_process=in_process,
                                      vectord_url=vectord_url, embedd_url=embedd_url,
                                      progress=progress, cache_dir=cache_dir)
    return reports[0]


async def evaluate_datasets(cfg: Config, pairs: Sequence[tuple[str | Path, str]],
                            modes: Sequence[str] | None = None, *,
                            options: SearchOptions | None = None,
                            corpus: str | None = None, in_process: bool = False,
                            vectord_url: str | None = None, embedd_url: str | None = None,
                            progress: Progress | None = None,
                            cache_dir: Path | None = None,
                            model: str | None = None) -> list[Report]:
    """evaluate_dataset for each (folder, split), with the daemons started once.

    corpus names the corpus of a single data set only (each has its own eval_<name>).
    """
    table = table_modes()
    modes = list(table) if modes is None else modes
    for mode in modes:
        if mode not in table:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(table)}")
    if corpus is not None and len(pairs) != 1:
        raise ValueError("corpus: only with a single data set")
    datasets = [(beir.load(folder, split), split) for folder, split in pairs]
    options = options or SearchOptions()
    reports: list[Report] = []
    async with _clients(cfg, in_process, vectord_url, embedd_url) as (ends, vc, ec):
        for dataset, split in datasets:
            name = corpus or beir.corpus_name(dataset)
            ing = await ingest(vc, ec, name, dataset.docs, progress=progress,
                               cache_dir=cache_dir, model=model)
            results, embed_seconds = await run_modes(vc, ec, name, dataset, modes, ing.model,
                                                     options)
            settings: dict[str, Any] = {
                "corpus": name,
                "model": ing.model,
                "depth": 100,
                "started": list(ends.started),
                "hybrid_options": dict(options.hybrid),
                "bm25_k1": cfg.vectord.bm25_k1,
                "bm25_b": cfg.vectord.bm25_b,
                "fusion_rrf_k": cfg.vectord.fusion_rrf_k,
            }
            reports.append(Report(dataset=dataset.name, split=split, docs=len(dataset.docs),
                                  queries=len(dataset.queries), ingest=ing,
                                  query_embed_seconds=embed_seconds, results=results,
                                  settings=settings))
    return reports


async def cross_validate_datasets(cfg: Config, pairs: Sequence[tuple[str | Path, str]],
                                  configs: Mapping[str, Mapping[str, Any]], *, folds: int = 5,
                                  in_process: bool = False, vectord_url: str | None = None,
                                  embedd_url: str | None = None,
                                  progress: Progress | None = None,
                                  cache_dir: Path | None = None,
                                  model: str | None = None) -> crossval.Result:
    """Every configuration's hybrid search on every judged query, cross-validated.

    configs maps a name to the hybrid request's options (crossval.CANDIDATES).
    """
    datasets = [(beir.load(folder, split), split) for folder, split in pairs]
    per_query: dict[str, dict[crossval.QueryKey, float]] = {name: {} for name in configs}
    async with _clients(cfg, in_process, vectord_url, embedd_url) as (_, vc, ec):
        for dataset, _split in datasets:
            name = beir.corpus_name(dataset)
            ing = await ingest(vc, ec, name, dataset.docs, progress=progress,
                               cache_dir=cache_dir, model=model)
            vectors = await embed_queries(ec, dataset.queries, ing.model)
            for config, hybrid in configs.items():
                run = await search_all(vc, name, dataset, "hybrid", vectors, SearchOptions(
                    hybrid={"k": crossval.DEPTH, **hybrid}))
                for qid, value in ndcg10_per_query(run, dataset.qrels).items():
                    per_query[config][(dataset.name, qid)] = value
    return crossval.cross_validate(per_query, folds)
