"""Federated ranking on real data: one corpus vs the same documents spread over several.

Usage: .venv/bin/python scripts/bench_federation.py [--max-queries N] [--json FILE]

For SciFact (train), Cranfield (dev) and CISI (dev), each stored (a) as one corpus,
(b) as 4 corpora split by a hash of the document id, and searched (c) as one corpus plus
the other two data sets as extra corpora and (d) as the 4 parts plus the other two; and
(e) the three data sets stored together in ONE corpus (ids prefixed by the set), the
ranking that (c) and (d) must equal by the federation property. Every
judged query is asked through matrixd (in-process, on vectord and embedd in-process) in
each mode; the script prints nDCG@10 per mode and setup, the mean number of top-10 hits
from the extra corpora, and the p50 latency of each. Document vectors are cached in
var/eval-cache (the split corpora reuse the whole corpus's vectors).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common import logs  # noqa: E402
from internal.config import load_or_exit  # noqa: E402
from internal.evaluation import beir  # noqa: E402
from internal.evaluation.ingest import VectorCache, cache_path, ingest  # noqa: E402
from internal.evaluation.metrics import evaluate  # noqa: E402
from internal.evaluation.runner import embed_queries  # noqa: E402
from internal.evaluation.services import services  # noqa: E402

DATASETS = (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev"))
MODES: dict[str, dict[str, Any]] = {
    "vector": {"mode": "vector"},
    "lexical": {"mode": "lexical"},
    "hybrid (default)": {"mode": "hybrid"},
    "hybrid rrf": {"mode": "hybrid", "fusion": "rrf"},
    "hybrid dbsf": {"mode": "hybrid", "fusion": "dbsf"},
}
PARTS = 4
CACHE = ROOT / "var" / "eval-cache"


def data_root() -> Path:
    return Path(os.environ.get("LAKEHOUSE_DATA") or ROOT.parent / "shared") / "data"


def part_of(doc_id: str) -> int:
    return hashlib.sha256(doc_id.encode()).digest()[0] % PARTS


async def gather_limited(coros: list[Any], limit: int = 4) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(c: Any) -> Any:
        async with gate:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def load_corpora(vc: VectordClient, ec: EmbedClient, ds: beir.Dataset, name: str
                       ) -> list[str]:
    """The whole corpus `name` and its 4 parts `name_p<i>` (vectors from the whole's cache)."""
    await ingest(vc, ec, name, ds.docs, cache_dir=CACHE)
    model, _ = await ec.default_model()
    whole = cache_path(CACHE, name, model)
    parts = []
    for i in range(PARTS):
        pname = f"{name}_p{i}"
        target = cache_path(CACHE, pname, model)
        if whole.exists() and not target.exists():
            shutil.copyfile(whole, target)
        await ingest(vc, ec, pname, [d for d in ds.docs if part_of(d.id) == i], cache_dir=CACHE)
        parts.append(pname)
    return parts


async def load_union(vc: VectordClient, ec: EmbedClient,
                     sets: dict[str, tuple[beir.Dataset, str, list[str]]]) -> str:
    """All documents of every set in one corpus `fed_union`, ids `<set>:<id>`."""
    model, _ = await ec.default_model()
    name = "fed_union"
    union = VectorCache(cache_path(CACHE, name, model), model)
    for _, whole, _ in sets.values():
        part = VectorCache(cache_path(CACHE, whole, model), model)
        union.vectors.update(part.vectors)
        union.dirty = union.dirty or bool(part.vectors)
    union.save()
    docs = [beir.Doc(f"{folder}:{d.id}", d.title, d.text, d.metadata)
            for folder, (ds, _, _) in sets.items() for d in ds.docs]
    await ingest(vc, ec, name, docs, cache_dir=CACHE)
    return name


async def ask(http: aiohttp.ClientSession, matrix: str, body: dict[str, Any]
              ) -> tuple[list[dict[str, Any]], float]:
    started = time.perf_counter()
    async with http.post(f"{matrix}/v1/matrix/search", json=body) as resp:
        out = await resp.json()
        if resp.status != 200:
            raise RuntimeError(f"matrixd answered {resp.status}: {out}")
    return out["hits"], (time.perf_counter() - started) * 1000


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-queries", type=int, default=0, help="judged queries per set (0: all)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    cfg = load_or_exit(None)
    logs.configure("warning", cfg.log.format)
    from internal.matrixd.server import make_app as make_matrixd
    from tests.helpers import with_section

    rows: list[dict[str, Any]] = []
    async with services(cfg, in_process=True) as ends, aiohttp.ClientSession() as http:
        vc = VectordClient(http, ends.vectord_url, timeout=600.0)
        ec = EmbedClient(http, ends.embedd_url, timeout=600.0)
        mcfg = with_section(cfg, "matrixd", vectord_url=(ends.vectord_url,),
                            embedd_url=(ends.embedd_url,))
        runner = web.AppRunner(make_matrixd(mcfg), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        matrix = f"http://127.0.0.1:{runner.addresses[0][1]}"
        sets: dict[str, tuple[beir.Dataset, str, list[str]]] = {}
        for folder, split in DATASETS:
            ds = beir.load(data_root() / folder, split)
            name = f"fed_{folder}"
            print(f"loading {folder}: {len(ds.docs)} docs", flush=True)
            sets[folder] = (ds, name, await load_corpora(vc, ec, ds, name))
        union = await load_union(vc, ec, sets)
        model, _ = await ec.default_model()
        try:
            for folder, (ds, name, parts) in sets.items():
                others = [n for f, (_, n, _) in sets.items() if f != folder]
                setups = {"(a) one corpus": [name], "(b) 4 parts": parts,
                          "(c) one + 2 other sets": [name, *others],
                          "(d) 4 parts + 2 other sets": [*parts, *others],
                          "(e) the 3 sets in one corpus": [union]}
                qids = list(ds.queries)[:args.max_queries or None]
                vectors = await embed_queries(ec, {q: ds.queries[q] for q in qids}, model)
                for mode, extra in MODES.items():
                    for setup, corpora in setups.items():
                        own = {name, *parts}
                        run: dict[str, list[str]] = {}
                        extra_hits: list[int] = []
                        lat: list[float] = []
                        outs = await gather_limited([ask(http, matrix, {
                            **extra, "query_text": ds.queries[q], "query_vector": vectors[q],
                            "corpora": corpora, "k": 10}) for q in qids])
                        prefix = f"{folder}:"
                        for q, (hits, ms) in zip(qids, outs, strict=True):
                            if corpora == [union]:
                                run[q] = [h["id"][len(prefix):] for h in hits
                                          if h["id"].startswith(prefix)]
                                extra_hits.append(sum(not h["id"].startswith(prefix)
                                                      for h in hits))
                            else:
                                run[q] = [h["id"] for h in hits]
                                extra_hits.append(sum(h["corpus"] not in own for h in hits))
                            lat.append(ms)
                        qrels = {q: ds.qrels[q] for q in qids if q in ds.qrels}
                        ndcg = evaluate(run, qrels)["ndcg@10"]
                        row = {"set": folder, "mode": mode, "setup": setup, "ndcg10": ndcg,
                               "extra_hits": statistics.fmean(extra_hits),
                               "p50_ms": statistics.median(lat)}
                        rows.append(row)
                        print(f"{folder:9} {mode:17} {setup:27} nDCG@10 {ndcg:.4f}  "
                              f"extra {row['extra_hits']:.2f}  p50 {row['p50_ms']:.1f} ms",
                              flush=True)
        finally:
            await runner.cleanup()
    print()
    print("| set | mode | (a) one | (b) 4 parts | (c) +2 sets | (d) both | (e) union in one | "
          "max gap to (a) | extra hits (c) / (d) | p50 ms (a) / (d) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for folder, _ in DATASETS:
        for mode in MODES:
            r = {x["setup"][:3]: x for x in rows if x["set"] == folder and x["mode"] == mode}
            a = r["(a)"]["ndcg10"]
            gap = max(abs(r[s]["ndcg10"] - a) for s in ("(b)", "(c)", "(d)"))
            print(f"| {folder} | {mode} | {a:.4f} | {r['(b)']['ndcg10']:.4f} | "
                  f"{r['(c)']['ndcg10']:.4f} | {r['(d)']['ndcg10']:.4f} | "
                  f"{r['(e)']['ndcg10']:.4f} | {gap:.4f} | "
                  f"{r['(c)']['extra_hits']:.2f} / {r['(d)']['extra_hits']:.2f} | "
                  f"{r['(a)']['p50_ms']:.1f} / {r['(d)']['p50_ms']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
