"""Grid search of BM25 and fusion settings on a data set's train/dev split.

Usage: .venv/bin/python scripts/tune_fusion.py --dataset DIR --split NAME [--candidates 100]

Ingests (or reuses) the corpus like `lakehouse eval`, then:
1. lexical nDCG@10 for BM25 k1, b and the title weight (requests to vectord);
2. with the best BM25, fetches each query's vector and lexical candidates once and
   fuses them offline with internal.vectord.fusion (the same code vectord runs for
   weighted and dbsf, and the same formula as its SQL RRF) over RRF k, weights and
   candidates per branch. Prints one table per step.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from pathlib import Path
from typing import Any

import aiohttp

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import load_or_exit
from internal.evaluation import beir
from internal.evaluation.ingest import ingest
from internal.evaluation.metrics import evaluate
from internal.evaluation.runner import embed_queries
from internal.evaluation.services import services
from internal.vectord import fusion

Branches = dict[str, dict[str, list[tuple[str, float]]]]


async def gather_limited(coros: list[Any], limit: int = 4) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(c: Any) -> Any:
        async with gate:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def lexical_run(vc: VectordClient, corpus: str, ds: beir.Dataset, k: int,
                      extra: dict[str, Any]) -> dict[str, list[tuple[str, float]]]:
    qids = list(ds.queries)
    outs = await gather_limited([vc.search(corpus, {"mode": "lexical", "query_text": ds.queries[q],
                                                    "k": k, **extra}) for q in qids])
    return {q: [(h["id"], float(h["score"])) for h in o["hits"]] for q, o in zip(qids, outs, strict=True)}


async def vector_run(vc: VectordClient, corpus: str, ds: beir.Dataset, k: int,
                     vectors: dict[str, list[float]]) -> dict[str, list[tuple[str, float]]]:
    qids = list(ds.queries)
    outs = await gather_limited([vc.search(corpus, {"mode": "vector", "query_vector": vectors[q],
                                                    "k": k, "ef_search": max(100, k)}) for q in qids])
    return {q: [(h["id"], float(h["scores"]["vector"])) for h in o["hits"]]
            for q, o in zip(qids, outs, strict=True)}


def ndcg(run: dict[str, list[str]], ds: beir.Dataset) -> float:
    return evaluate(run, ds.qrels)["ndcg@10"]


def fused_ndcg(ds: beir.Dataset, vec: dict[str, list[tuple[str, float]]],
               lex: dict[str, list[tuple[str, float]]], n: int, method: str,
               k: int = 60, weights: dict[str, float] | None = None) -> dict[str, float]:
    run = {}
    for q in ds.queries:
        out = fusion.fuse(method, {"vector": vec[q][:n], "lexical": lex[q][:n]}, k=k, weights=weights)
        run[q] = [f.id for f in out[:100]]
    return evaluate(run, ds.qrels)


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--split", required=True)
    ap.add_argument("--candidates", type=int, default=100)
    args = ap.parse_args()
    cfg = load_or_exit()
    ds = beir.load(args.dataset, args.split)
    corpus = beir.corpus_name(ds)
    async with services(cfg) as ends, aiohttp.ClientSession() as http:
        vc = VectordClient(http, ends.vectord_url, timeout=600)
        ec = EmbedClient(http, ends.embedd_url, timeout=600)
        ing = await ingest(vc, ec, corpus, ds.docs,
                           cache_dir=Path(cfg.vectord.data_dir).parent / "eval-cache")
        print(f"{ds.name} ({args.split}): {len(ds.queries)} queries, corpus {corpus} "
              f"({ing.embedded} embedded, {ing.reused} reused)")

        print("\n| k1 | b | title weight | lexical nDCG@10 |\n|---:|---:|---:|---:|")
        best: tuple[float, dict[str, Any]] = (-1.0, {})
        for k1, b, wa in itertools.product((0.9, 1.2, 1.5), (0.5, 0.75, 0.9), (1.0, 2.0)):
            extra = {"bm25_k1": k1, "bm25_b": b, "field_weights": {"title": wa, "text": 1.0, "tags": 1.0}}
            lex = await lexical_run(vc, corpus, ds, 10, extra)
            score = ndcg({q: [d for d, _ in hits] for q, hits in lex.items()}, ds)
            print(f"| {k1} | {b} | {wa} | {score:.4f} |")
            if score > best[0]:
                best = (score, extra)
        print(f"\nbest BM25: {best[1]} nDCG@10 {best[0]:.4f}")

        top = max(200, args.candidates)
        vectors = await embed_queries(ec, ds.queries, ing.model)
        vec = await vector_run(vc, corpus, ds, top, vectors)
        lex_default = await lexical_run(vc, corpus, ds, top, {})
        lex_best = await lexical_run(vc, corpus, ds, top, best[1])
    vec_only = ndcg({q: [d for d, _ in h] for q, h in vec.items()}, ds)
    print(f"vector nDCG@10 {vec_only:.4f}")

    for label, lex in (("default BM25", lex_default), ("best BM25", lex_best)):
        print(f"\n{label}\n| method | setting | candidates | nDCG@10 | Recall@100 |\n|---|---|---:|---:|---:|")
        for n in (50, 100, 200):
            for k in (10, 20, 40, 60, 100):
                m = fused_ndcg(ds, vec, lex, n, "rrf", k=k)
                print(f"| rrf | k={k} | {n} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
            for wv in (0.3, 0.4, 0.5, 0.6, 0.7):
                w = {"vector": wv, "lexical": 1 - wv}
                m = fused_ndcg(ds, vec, lex, n, "rrf", k=60, weights=w)
                print(f"| rrf | k=60 vector {wv} / lexical {1 - wv:.1f} | {n} | "
                      f"{m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
                for method in ("weighted", "dbsf"):
                    m = fused_ndcg(ds, vec, lex, n, method, weights=w)
                    print(f"| {method} | vector {wv} / lexical {1 - wv:.1f} | {n} | "
                          f"{m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
