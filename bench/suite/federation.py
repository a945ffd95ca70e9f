"""Federated ranking on real data: one corpus against the same documents spread over several.

SciFact (train), Cranfield (dev) and CISI (dev), each stored (a) as one corpus, (b) as 4
corpora split by a hash of the id, searched (c) as one corpus plus the other two sets as
extra corpora and (d) as the 4 parts plus the other two; and (e) the three sets together
in ONE corpus (ids prefixed by set), the ranking (c) and (d) must equal by the federation
property. Every judged query is asked through matrixd (in-process, on vectord and embedd
in-process) in each mode: nDCG@10 per mode and setup, the mean number of top-10 hits from
the extra corpora, and the p50 latency of each. Document vectors are cached (the split
corpora reuse the whole corpus's vectors).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import time
from typing import Any

import aiohttp

from bench.data.beir import CACHE, part_of
from bench.harness import Run
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common import logs
from internal.config import load_or_exit
from internal.evaluation import beir
from internal.evaluation.ingest import VectorCache, cache_path, ingest
from internal.evaluation.metrics import evaluate
from internal.evaluation.runner import embed_queries
from internal.evaluation.services import services
from internal.matrixd.server import make_app as make_matrixd
from tests.helpers import serve, url_of, with_section

OPTIONS = {"max_queries": (0, "judged queries a set (0: all)")}
QUICK = {"max_queries": 40}
DATASETS = (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev"))
MODES: dict[str, dict[str, Any]] = {
    "vector": {"mode": "vector"}, "lexical": {"mode": "lexical"}, "hybrid (default)": {"mode": "hybrid"},
    "hybrid rrf": {"mode": "hybrid", "fusion": "rrf"}, "hybrid dbsf": {"mode": "hybrid", "fusion": "dbsf"}}
PARTS = 4


async def load(vc: VectordClient, ec: EmbedClient, ds: beir.Dataset, name: str) -> list[str]:
    """The whole corpus `name` and its parts `name_p<i>` (vectors from the whole's cache)."""
    await ingest(vc, ec, name, ds.docs, cache_dir=CACHE)
    model, _ = await ec.default_model()
    whole = cache_path(CACHE, name, model)
    for i in range(PARTS):
        if whole.exists() and not cache_path(CACHE, f"{name}_p{i}", model).exists():
            shutil.copyfile(whole, cache_path(CACHE, f"{name}_p{i}", model))
        await ingest(vc, ec, f"{name}_p{i}", [d for d in ds.docs if part_of(d.id, PARTS) == i],
                     cache_dir=CACHE)
    return [f"{name}_p{i}" for i in range(PARTS)]


async def union(vc: VectordClient, ec: EmbedClient, sets: dict[str, tuple[beir.Dataset, str]]) -> str:
    """All documents of every set in one corpus `fed_union`, ids `<set>:<id>`."""
    model, _ = await ec.default_model()
    cache = VectorCache(cache_path(CACHE, "fed_union", model), model)
    for _, whole in sets.values():
        part = VectorCache(cache_path(CACHE, whole, model), model)
        cache.vectors.update(part.vectors)
        cache.dirty = cache.dirty or bool(part.vectors)
    cache.save()
    await ingest(vc, ec, "fed_union", [beir.Doc(f"{f}:{d.id}", d.title, d.text, d.metadata)
                                       for f, (ds, _) in sets.items() for d in ds.docs], cache_dir=CACHE)
    return "fed_union"


async def ask(http: aiohttp.ClientSession, matrix: str, body: dict[str, Any]) -> tuple[list[Any], float]:
    t0 = time.perf_counter()
    async with http.post(f"{matrix}/v1/matrix/search", json=body) as resp:
        out = await resp.json()
        if resp.status != 200:
            raise SystemExit(f"matrixd answered {resp.status}: {out}")
    return out["hits"], (time.perf_counter() - t0) * 1000


async def main(run: Run) -> None:
    cfg = load_or_exit(None)
    logs.configure("warning", cfg.log.format)
    rows: dict[tuple[str, str, str], tuple[float, float, float]] = {}
    async with services(cfg, in_process=True) as ends, aiohttp.ClientSession() as http:
        vc, ec = VectordClient(http, ends.vectord_url, timeout=600.0), EmbedClient(http, ends.embedd_url, timeout=600.0)
        server = await serve(make_matrixd(with_section(cfg, "matrixd", vectord_url=(ends.vectord_url,),
                                                       embedd_url=(ends.embedd_url,))))
        matrix = url_of(server)
        sets = {f: (beir.load(run.need("data", f), split), f"fed_{f}") for f, split in DATASETS}
        parts = {f: await load(vc, ec, ds, name) for f, (ds, name) in sets.items()}
        whole = await union(vc, ec, sets)
        model, _ = await ec.default_model()
        gate = asyncio.Semaphore(4)

        async def one(body: dict[str, Any]) -> tuple[list[Any], float]:
            async with gate:
                return await ask(http, matrix, body)
        try:
            for folder, (ds, name) in sets.items():
                others = [n for f, (_, n) in sets.items() if f != folder]
                setups = {"(a)": [name], "(b)": parts[folder], "(c)": [name, *others],
                          "(d)": [*parts[folder], *others], "(e)": [whole]}
                qids = list(ds.queries)[:run.args.max_queries or None]
                vecs = await embed_queries(ec, {q: ds.queries[q] for q in qids}, model)
                own, prefix = {name, *parts[folder]}, f"{folder}:"
                for mode, extra in MODES.items():
                    for setup, corpora in setups.items():
                        outs = await asyncio.gather(*(one({**extra, "query_text": ds.queries[q],
                                                           "query_vector": vecs[q], "corpora": corpora,
                                                           "k": 10}) for q in qids))
                        if setup == "(e)":
                            got = {q: [h["id"][len(prefix):] for h in hits if h["id"].startswith(prefix)]
                                   for q, (hits, _) in zip(qids, outs, strict=True)}
                            extra_hits = [sum(not h["id"].startswith(prefix) for h in hits) for hits, _ in outs]
                        else:
                            got = {q: [h["id"] for h in hits] for q, (hits, _) in zip(qids, outs, strict=True)}
                            extra_hits = [sum(h["corpus"] not in own for h in hits) for hits, _ in outs]
                        ndcg = evaluate(got, {q: ds.qrels[q] for q in qids if q in ds.qrels})["ndcg@10"]
                        rows[(folder, mode, setup)] = (ndcg, statistics.fmean(extra_hits),
                                                       statistics.median(ms for _, ms in outs))
                        run.progress(f"{folder} {mode} {setup} nDCG@10 {ndcg:.4f}")
        finally:
            await server.close()
    out = []
    for folder, _ in DATASETS:
        for mode in MODES:
            r = {s: rows[(folder, mode, s)] for s in ("(a)", "(b)", "(c)", "(d)", "(e)")}
            gap = max(abs(r[s][0] - r["(a)"][0]) for s in ("(b)", "(c)", "(d)"))
            out.append((folder, mode, *(r[s][0] for s in r), gap,
                        f"{r['(c)'][1]:.2f} / {r['(d)'][1]:.2f}", f"{r['(a)'][2]:.1f} / {r['(d)'][2]:.1f}"))
    run.table("nDCG@10 per set, mode and setup", ["set", "mode", "(a) one:.4f", "(b) 4 parts:.4f",
              "(c) +2 sets:.4f", "(d) both:.4f", "(e) union in one:.4f", "max gap to (a):.4f",
              "extra hits (c) / (d)", "p50 ms (a) / (d)"], out)
