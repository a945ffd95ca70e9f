"""Retrieval quality with the eval corpora's vectors in float32 and in float16.

`lakehouse eval`'s corpora (eval_scifact, eval_cranfield, eval_cisi in [vectord] data_dir,
ingested or reused, document vectors from its eval-cache), vectord and embedd in-process.
For each precision of --order in turn, the three corpora converted to it by vectord (POST
.../convert, the online conversion `lakehouse corpora convert` starts) and scored: the
vector mode and the default hybrid search at depth 100 (nDCG@10, recall@10, recall@100
per set, and the mean counting each set once), then the cross-validated table of
`lakehouse eval --cross-validate` (the shipped default's held-out mean). The corpora are
left in the last precision of --order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import aiohttp

from bench.harness import Run
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common import logs
from internal.common.auth import service_headers
from internal.common.errors import Conflict
from internal.config import Config, load_or_exit
from internal.evaluation import beir, crossval
from internal.evaluation.harness import cross_validate_datasets
from internal.evaluation.ingest import ingest
from internal.evaluation.metrics import evaluate
from internal.evaluation.runner import SearchOptions, embed_queries, search_all
from internal.evaluation.services import services

OPTIONS = {"order": "float32,float16"}
QUICK: dict[str, object] = {}
SETS = (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev"))
MODES, METRICS = ("vector", "hybrid"), ("ndcg@10", "recall@10", "recall@100")
Scores = dict[tuple[str, str], dict[str, float]]  # (set, mode) -> metric -> value


def cache_dir(cfg: Config) -> Path:
    return Path(cfg.vectord.data_dir).parent / "eval-cache"  # as `lakehouse eval`


def measures(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """nDCG@10 and recall@100 as the eval scores them; recall@10: the run cut at 10."""
    full = evaluate(run, qrels)
    top10 = evaluate({q: list(ids)[:10] for q, ids in run.items()}, qrels)
    return {"ndcg@10": full["ndcg@10"], "recall@10": top10["recall@100"], "recall@100": full["recall@100"]}


async def score(cfg: Config, datasets: list[beir.Dataset], precision: str | None) -> Scores:
    """Every corpus converted to `precision` (None: left as it is), then scored."""
    out: Scores = {}
    async with services(cfg, in_process=True) as ends, \
            aiohttp.ClientSession(headers=service_headers(cfg)) as session:
        vc, ec = VectordClient(session, ends.vectord_url, timeout=600.0), EmbedClient(session, ends.embedd_url, timeout=600.0)
        for ds in datasets:
            name = beir.corpus_name(ds)
            ing = await ingest(vc, ec, name, ds.docs, cache_dir=cache_dir(cfg))
            if precision:
                try:
                    await vc.call("POST", f"/v1/vectors/corpora/{name}/convert", {"precision": precision})
                except Conflict:  # in that precision already
                    pass
                while True:
                    c = await vc.get_corpus(name)
                    if c.precision == precision and c.conversion is None:
                        break
                    await asyncio.sleep(0.5)
            vectors = await embed_queries(ec, ds.queries, ing.model)
            for mode in MODES:
                out[(ds.name, mode)] = measures(await search_all(vc, name, ds, mode, vectors, SearchOptions()), ds.qrels)
    return out


def main(run: Run) -> None:
    cfg = load_or_exit(None)
    logs.configure("warning", cfg.log.format)  # as `lakehouse eval`: no line per request
    pairs = [(run.need("data", name), split) for name, split in SETS]
    datasets = [beir.load(folder, split) for folder, split in pairs]
    results: dict[str, Scores] = {}
    held: dict[str, crossval.Result] = {}
    asyncio.run(score(cfg, datasets, None))  # ingested (or reused) before any rewrite
    for p in run.args.order.split(","):
        t0 = time.perf_counter()
        results[p] = asyncio.run(score(cfg, datasets, p))
        run.progress(f"{p}: converted and scored in {time.perf_counter() - t0:.1f} s")
        held[p] = asyncio.run(cross_validate_datasets(cfg, pairs, crossval.CANDIDATES, in_process=True,
                                                      cache_dir=cache_dir(cfg)))
    names, sets = list(results), [ds.name for ds in datasets]
    rows = []
    for mode in MODES:
        for s in [*sets, "mean"]:
            vals = {p: results[p][(s, mode)] if s != "mean" else
                    {m: sum(results[p][(x, mode)][m] for x in sets) / len(sets) for m in METRICS} for p in names}
            rows.append((mode, s, *(vals[p][m] for m in METRICS for p in names),
                         *(vals[names[-1]][m] - vals[names[0]][m] for m in METRICS)))
    run.table("each precision's quality", ["mode", "set", *(f"{m} {p}:.4f" for m in METRICS for p in names),
                                           *(f"{m} diff:+.4f" for m in METRICS)], rows)
    run.table("The shipped default (hybrid), nDCG@10 cross-validated over 5 folds",
              ["precision", "held-out mean:.4f", "every query:.4f"],
              [(p, r.mean_held_out_by_config[crossval.AS_SHIPPED], r.on_all[crossval.AS_SHIPPED])
               for p, r in held.items()])
    for p, r in held.items():
        print(f"\n{p}:\n" + crossval.table(r, default=crossval.AS_SHIPPED))
