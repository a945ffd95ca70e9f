"""Retrieval quality with the eval corpora's vectors in float32 and in float16.

Uses `lakehouse eval`'s corpora (eval_scifact, eval_cranfield, eval_cisi in [vectord]
data_dir, ingested or reused, document vectors from its eval-cache), vectord and embedd
in-process. For each precision in turn, the three corpora are converted to it by vectord
(POST .../convert, the online conversion `lakehouse corpora convert` starts), and
scored: the vector mode and the default hybrid search at depth 100 (nDCG@10, recall@10,
recall@100 per set, and the mean counting each set once), then the cross-validated
table of `lakehouse eval --cross-validate` (the shipped default's held-out mean). The
corpora are left in the last precision of --order.

    flock -s /tmp/lakehouse-heavy.lock .venv/bin/python scripts/bench_halfvec_quality.py \\
        [--data ../shared/data] [--order float32,float16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common import logs  # noqa: E402
from internal.common.auth import service_headers  # noqa: E402
from internal.common.errors import Conflict  # noqa: E402
from internal.config import Config, load_or_exit  # noqa: E402
from internal.evaluation import beir, crossval  # noqa: E402
from internal.evaluation.harness import cross_validate_datasets  # noqa: E402
from internal.evaluation.ingest import ingest  # noqa: E402
from internal.evaluation.metrics import evaluate  # noqa: E402
from internal.evaluation.runner import SearchOptions, embed_queries, search_all  # noqa: E402
from internal.evaluation.services import services  # noqa: E402

SETS = (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev"))
MODES = ("vector", "hybrid")
METRICS = ("ndcg@10", "recall@10", "recall@100")
Scores = dict[tuple[str, str], dict[str, float]]  # (set, mode) -> metric -> value


def cache_dir(cfg: Config) -> Path:
    return Path(cfg.vectord.data_dir).parent / "eval-cache"  # as `lakehouse eval`


def measures(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
             ) -> dict[str, float]:
    """nDCG@10 and recall@100 as the eval scores them; recall@10 is recall@100 of the
    run cut at 10 (ir-measures either way)."""
    full = evaluate(run, qrels)
    top10 = evaluate({q: list(ids)[:10] for q, ids in run.items()}, qrels)
    return {"ndcg@10": full["ndcg@10"], "recall@10": top10["recall@100"],
            "recall@100": full["recall@100"]}


async def score(cfg: Config, datasets: list[beir.Dataset]) -> Scores:
    out: Scores = {}
    async with services(cfg, in_process=True) as ends, \
            aiohttp.ClientSession(headers=service_headers(cfg)) as session:
        vc = VectordClient(session, ends.vectord_url, timeout=600.0)
        ec = EmbedClient(session, ends.embedd_url, timeout=600.0)
        for ds in datasets:
            name = beir.corpus_name(ds)
            ing = await ingest(vc, ec, name, ds.docs, cache_dir=cache_dir(cfg))
            vectors = await embed_queries(ec, ds.queries, ing.model)
            for mode in MODES:
                run = await search_all(vc, name, ds, mode, vectors, SearchOptions())
                out[(ds.name, mode)] = measures(run, ds.qrels)
    return out


async def convert(cfg: Config, datasets: list[beir.Dataset], precision: str) -> float:
    """Every corpus converted to `precision` by vectord (one at a time); the seconds taken."""
    started = time.perf_counter()
    async with services(cfg, in_process=True) as ends, \
            aiohttp.ClientSession(headers=service_headers(cfg)) as session:
        vc = VectordClient(session, ends.vectord_url, timeout=600.0)
        for ds in datasets:
            name = beir.corpus_name(ds)
            try:
                await vc.call("POST", f"/v1/vectors/corpora/{name}/convert",
                              {"precision": precision})
            except Conflict:  # in that precision already
                pass
            while True:
                corpus = await vc.get_corpus(name)
                if corpus.precision == precision and corpus.conversion is None:
                    break
                await asyncio.sleep(0.5)
    return time.perf_counter() - started


def table(by_precision: dict[str, Scores], sets: list[str]) -> str:
    names = list(by_precision)
    lines = ["| mode | set | " + " | ".join(f"{m} {p}" for m in METRICS for p in names)
             + " | " + " | ".join(f"{m} diff" for m in METRICS) + " |",
             "|---|---|" + "---:|" * (len(METRICS) * (len(names) + 1))]
    for mode in MODES:
        for s in [*sets, "mean"]:
            vals = {p: (by_precision[p][(s, mode)] if s != "mean" else
                        {m: sum(by_precision[p][(x, mode)][m] for x in sets) / len(sets)
                         for m in METRICS}) for p in names}
            cells = [f"{vals[p][m]:.4f}" for m in METRICS for p in names]
            diffs = [f"{vals[names[-1]][m] - vals[names[0]][m]:+.4f}" for m in METRICS]
            lines.append(f"| {mode} | {s} | " + " | ".join(cells + diffs) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--order", default="float32,float16")
    args = parser.parse_args()
    cfg = load_or_exit(None)
    logs.configure("warning", cfg.log.format)  # as `lakehouse eval`: no line per request
    pairs = [(Path(args.data) / name, split) for name, split in SETS]
    datasets = [beir.load(folder, split) for folder, split in pairs]
    results: dict[str, Scores] = {}
    held: dict[str, crossval.Result] = {}
    asyncio.run(score(cfg, datasets))  # ingested (or reused) before any rewrite
    for p in args.order.split(","):
        seconds = asyncio.run(convert(cfg, datasets, p))
        print(f"{p}: corpora converted in {seconds:.1f} s", flush=True)
        results[p] = asyncio.run(score(cfg, datasets))
        held[p] = asyncio.run(cross_validate_datasets(
            cfg, pairs, crossval.CANDIDATES, in_process=True, cache_dir=cache_dir(cfg)))
    print("\n" + table(results, [ds.name for ds in datasets]))
    print("\nThe shipped default (hybrid), nDCG@10 cross-validated over 5 folds (held-out mean):")
    for p, r in held.items():
        print(f"  {p}: {r.mean_held_out_by_config[crossval.AS_SHIPPED]:.4f} (every query: "
              f"{r.on_all[crossval.AS_SHIPPED]:.4f})")
    for p, r in held.items():
        print(f"\n{p}:\n" + crossval.table(r, default=crossval.AS_SHIPPED))


if __name__ == "__main__":
    main()
