"""Grid search of the hybrid defaults over several data sets, judged on their mean.

Usage:
    .venv/bin/python scripts/tune_fusion.py [--set DIR:SPLIT ...] [--bm25-grid] [--prf-grid]

Default sets: SciFact train, Cranfield dev, CISI dev (../shared/data). Ingests (or reuses)
each corpus like `lakehouse eval`, then:
1. (--bm25-grid) lexical nDCG@10 for BM25 k1, b and the title weight, per set and mean;
2. fetches each query's vector and lexical candidates once (200 per branch) and fuses
   them offline with internal.vectord.search.fusion (the code vectord runs) over the method,
   weights, RRF k and candidates per branch; prints each set's nDCG@10 and the mean,
   best mean first, today's default marked;
3. (--prf-grid) end to end through vectord: the default hybrid with pseudo-relevance
   feedback settings (`prf`), each set and the mean.
The default is chosen on the mean (each set counts once), not on one set.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common.errors import ServiceError  # noqa: E402
from internal.config import load_or_exit  # noqa: E402
from internal.evaluation import beir  # noqa: E402
from internal.evaluation.ingest import (  # noqa: E402
    IngestReport,
    VectorCache,
    cache_path,
    ingest,
)
from internal.evaluation.metrics import evaluate  # noqa: E402
from internal.evaluation.report import Report, mean_table  # noqa: E402
from internal.evaluation.runner import SearchOptions, embed_queries, run_modes  # noqa: E402
from internal.evaluation.services import services  # noqa: E402
from internal.vectord.search import fusion  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
DEFAULT_SETS = (f"{DATA / 'scifact'}:train", f"{DATA / 'cranfield'}:dev", f"{DATA / 'cisi'}:dev")
TOP = 200  # candidates fetched per branch; the grid cuts them to 50/100/200
# Today's default: weighted, vector 0.5 / lexical 0.5, 100 candidates.
BASELINE = ("weighted", "v0.5/l0.5", 100)

Hits = dict[str, list[tuple[str, float]]]


@dataclass
class SetData:
    name: str
    ds: beir.Dataset
    corpus: str
    vec: Hits
    lex: Hits


async def gather_limited(coros: list[Any], limit: int = 4) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(c: Any) -> Any:
        async with gate:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def search_all(vc: VectordClient, corpus: str, ds: beir.Dataset,
                     body: dict[str, Any], vectors: dict[str, list[float]] | None = None,
                     key: str = "score") -> Hits:
    qids = list(ds.queries)

    def one(q: str) -> Any:
        b = dict(body)
        if b.get("mode") in ("lexical", "hybrid"):
            b["query_text"] = ds.queries[q]
        if vectors is not None:
            b["query_vector"] = vectors[q]
        return vc.search(corpus, b)

    outs = await gather_limited([one(q) for q in qids])
    return {q: [(h["id"], float(h["scores"]["vector"] if key == "vector" else h["score"] or 0.0))
                for h in o["hits"]] for q, o in zip(qids, outs, strict=True)}


def ndcg(ds: beir.Dataset, run: Hits) -> float:
    return evaluate({q: [d for d, _ in hits] for q, hits in run.items()}, ds.qrels)["ndcg@10"]


def fused(s: SetData, n: int, method: str, k: int, weights: dict[str, float] | None) -> float:
    run = {}
    for q in s.ds.queries:
        out = fusion.fuse(method, {"vector": s.vec[q][:n], "lexical": s.lex[q][:n]}, k=k,
                          weights=weights)
        run[q] = [(f.id, f.score) for f in out[:100]]
    return ndcg(s.ds, run)


def table(title: str, rows: list[tuple[str, list[float]]], names: Sequence[str],
          mark: str | None = None, limit: int | None = None) -> None:
    print(f"\n{title}\n| setting | " + " | ".join(names) + " | mean |")
    print("|---|" + "---:|" * (len(names) + 1))
    ranked = sorted(rows, key=lambda r: -sum(r[1]) / len(r[1]))
    shown = ranked if limit is None else ranked[:limit] + [r for r in ranked[limit:]
                                                            if r[0] == mark]
    for label, values in shown:
        mean = sum(values) / len(values)
        bold = "**" if label == mark else ""
        print(f"| {bold}{label}{bold} | " + " | ".join(f"{v:.4f}" for v in values)
              + f" | {bold}{mean:.4f}{bold} |")


def fusion_grid(sets: list[SetData]) -> dict[str, Any]:
    """Prints the grid; returns the best mean's request fields (fusion, weights, ...)."""
    names = [s.name for s in sets]
    rows: list[tuple[str, list[float]]] = []
    fields: dict[str, dict[str, Any]] = {}
    for n in (50, 100, 200):
        for k in (10, 20, 40, 60):
            rows.append((f"rrf k={k} n={n}", [fused(s, n, "rrf", k, None) for s in sets]))
            fields[rows[-1][0]] = {"fusion": "rrf", "rrf_k": k, "candidates": n}
        for wv in (0.3, 0.4, 0.5, 0.6, 0.7):
            w = {"vector": wv, "lexical": round(1 - wv, 2)}
            for method in ("weighted", "dbsf"):
                rows.append((f"{method} v{wv}/l{1 - wv:.1f} n={n}",
                             [fused(s, n, method, 60, w) for s in sets]))
                fields[rows[-1][0]] = {"fusion": method, "weights": w, "candidates": n}
            for k in (20, 60):
                rows.append((f"rrf k={k} v{wv}/l{1 - wv:.1f} n={n}",
                             [fused(s, n, "rrf", k, w) for s in sets]))
                fields[rows[-1][0]] = {"fusion": "rrf", "rrf_k": k, "weights": w,
                                       "candidates": n}
    singles = [("vector alone", [ndcg(s.ds, s.vec) for s in sets]),
               ("lexical alone", [ndcg(s.ds, s.lex) for s in sets])]
    table("single branches (nDCG@10)", singles, names)
    method, wlabel, n = BASELINE
    mark = f"{method} {wlabel} n={n}"
    table("fusion, best mean first (nDCG@10; top 25 and today's default)", rows, names,
          mark=mark, limit=25)
    for m in ("rrf", "weighted", "dbsf"):
        best = max((r for r in rows if r[0].startswith(m)), key=lambda r: sum(r[1]))
        print(f"best {m}: {best[0]} mean {sum(best[1]) / len(best[1]):.4f} "
              + " ".join(f"{v:.4f}" for v in best[1]))
    top = max(rows, key=lambda r: sum(r[1]))
    print(f"best mean: {top[0]}", flush=True)
    return fields[top[0]]


async def language_check(vc: VectordClient, ec: EmbedClient,
                         loaded: list[tuple[beir.Dataset, str, str, dict[str, list[float]]]],
                         cache_dir: Path) -> list[tuple[str, list[float]]]:
    """Each set also as `lakehouse ingest` stores it: corpus language auto, no item language,
    documents with no text kept; vectors from the harness corpus's cache."""
    rows: dict[str, list[float]] = {}
    for ds, _, corpus, vectors in loaded:
        model, _ = await ec.default_model()
        cache = VectorCache(cache_path(cache_dir, corpus, model), model)
        name = f"{corpus}_cli"
        try:
            await vc.delete_corpus(name)
        except ServiceError as exc:
            if exc.status != 404:
                raise
        first = next(iter(cache.vectors.values()))
        await vc.create_corpus(name, len(first), "cosine", language=None, model=model)
        items = []
        for d in ds.docs:
            text = f"{d.title}\n{d.text}" if d.title else d.text
            if not text.strip():
                continue  # `lakehouse ingest` skips them (nothing to embed)
            vec = cache.get(text)
            if vec is None:
                vec = (await ec.embed([text], input_type="document", model=model)).vectors[0]
            items.append({"id": d.id, "vector": vec, "text": d.text, "title": d.title or None,
                          "tags": [], "metadata": d.metadata})
        for i in range(0, len(items), 256):
            await vc.upsert(name, items[i:i + 256], model=model)
        for label, target in (("harness (english)", corpus), ("ingest path (auto)", name)):
            for mode in ("lexical", "hybrid"):
                body: dict[str, Any] = {"mode": mode, "k": 100}
                run = await search_all(vc, target, ds, body,
                                       vectors if mode == "hybrid" else None)
                rows.setdefault(f"{mode} {label}", []).append(ndcg(ds, run))
    return list(rows.items())


def pick_prf(rows: list[tuple[str, list[float]]], loss: float = 0.005) -> str | None:
    """The best-mean feedback setting that beats "no prf" on the mean and loses on no set by
    more than `loss` (the rule for turning it on by default), or None."""
    base = dict(rows).get("no prf")
    if base is None:
        return None
    ok = [(sum(v), label) for label, v in rows if label != "no prf"
          and sum(v) > sum(base) and all(a >= b - loss for a, b in zip(v, base, strict=True))]
    return max(ok)[1] if ok else None


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", metavar="DIR:SPLIT",
                    help="a BEIR folder and its split (repeat); default: the three dev sets")
    ap.add_argument("--bm25-grid", action="store_true", help="also grid BM25 k1, b, title weight")
    ap.add_argument("--prf-grid", action="store_true",
                    help="also measure pseudo-relevance feedback end to end")
    ap.add_argument("--language-check", action="store_true",
                    help="also load each set as `lakehouse ingest` does (language auto, empty "
                         "documents kept) and compare lexical and default hybrid")
    ap.add_argument("--no-fusion-grid", action="store_true", help="skip the offline fusion grid")
    ap.add_argument("--prf-fusion", choices=("default", "best"), default="default",
                    help="the fusion the PRF grid runs on: vectord's default (sent as no "
                         "fusion fields) or the fusion grid's best mean")
    args = ap.parse_args()
    cfg = load_or_exit()
    sets: list[SetData] = []
    prf_rows: list[tuple[str, list[float]]] = []
    bm25_rows: list[tuple[str, list[float]]] = []
    lang_rows: list[tuple[str, list[float]]] = []
    prf_fields: dict[str, dict[str, Any]] = {}
    ings: dict[str, IngestReport] = {}
    async with services(cfg) as ends, aiohttp.ClientSession() as http:
        vc = VectordClient(http, ends.vectord_url, timeout=600)
        ec = EmbedClient(http, ends.embedd_url, timeout=600)
        loaded = []
        for spec in args.set or DEFAULT_SETS:
            folder, _, split = spec.rpartition(":")
            ds = beir.load(folder, split)
            corpus = beir.corpus_name(ds)
            ing = await ingest(vc, ec, corpus, ds.docs,
                               cache_dir=Path(cfg.vectord.data_dir).parent / "eval-cache")
            print(f"{ds.name} ({split}): {len(ds.queries)} queries, corpus {corpus} "
                  f"({ing.embedded} embedded, {ing.reused} reused)", flush=True)
            vectors = await embed_queries(ec, ds.queries, ing.model)
            loaded.append((ds, split, corpus, vectors))
            ings[corpus] = ing
            vec = await search_all(vc, corpus, ds, {"mode": "vector", "k": TOP, "ef_search": TOP},
                                   vectors, key="vector")
            lex = await search_all(vc, corpus, ds, {"mode": "lexical", "k": TOP})
            sets.append(SetData(f"{ds.name} {split}", ds, corpus, vec, lex))
        names = [s.name for s in sets]
        best_fusion: dict[str, Any] = {}
        if not args.no_fusion_grid:
            best_fusion = fusion_grid(sets)
        if args.language_check:
            try:
                lang_rows = await language_check(
                    vc, ec, loaded, Path(cfg.vectord.data_dir).parent / "eval-cache")
                table("`lakehouse ingest` path (language auto) vs the harness (english)",
                      lang_rows, names)
            except Exception as exc:  # the other tables still print
                print(f"language check failed: {exc!r}", flush=True)
        if args.bm25_grid:
            for k1, b, wa in itertools.product((0.9, 1.2, 1.5), (0.5, 0.75, 0.9), (1.0, 2.0)):
                extra = {"bm25_k1": k1, "bm25_b": b,
                         "field_weights": {"title": wa, "text": 1.0, "tags": 1.0}}
                bm25_rows.append((f"k1 {k1} b {b} title {wa}", [
                    ndcg(ds, await search_all(vc, corpus, ds, {"mode": "lexical", "k": 10, **extra}))
                    for ds, _, corpus, _ in loaded]))
        if args.prf_grid:
            if args.prf_fusion == "default":
                best_fusion = {}
            print(f"prf grid with the fusion: {best_fusion or 'vectord default'}", flush=True)
            settings: list[tuple[str, dict[str, Any]]] = [("no prf", {"docs": 0})]
            for m, beta in itertools.product((3, 5, 10), (0.25, 0.5)):
                settings.append((f"rocchio docs {m} weight {beta}",
                                 {"docs": m, "terms": 0, "weight": beta}))
            for m, t, lam in itertools.product((3, 5, 10), (10, 20, 40), (0.3, 0.5, 1.0)):
                settings.append((f"rm3 docs {m} terms {t} weight {lam}",
                                 {"docs": m, "terms": t, "weight": lam, "vector": False}))
            for m, t, lam in itertools.product((3, 5), (20, 40), (0.25, 0.5)):
                settings.append((f"rm3+rocchio docs {m} terms {t} weight {lam}",
                                 {"docs": m, "terms": t, "weight": lam, "vector": True}))
            for label, prf in settings:
                values = []
                try:
                    for ds, _, corpus, vectors in loaded:
                        run = await search_all(vc, corpus, ds,
                                               {"mode": "hybrid", "k": 10, "prf": prf,
                                                **best_fusion}, vectors)
                        values.append(ndcg(ds, run))
                except Exception as exc:  # the other settings still run
                    print(f"prf {label} failed: {exc!r}", flush=True)
                    continue
                print(f"prf {label}: " + " ".join(f"{v:.4f}" for v in values)
                      + f" mean {sum(values) / len(values):.4f}", flush=True)
                prf_rows.append((label, values))
                prf_fields[label] = prf
        chosen = dict(best_fusion)
        pick = pick_prf(prf_rows)
        if pick is not None:
            chosen["prf"] = prf_fields[pick]
        if chosen.get("candidates", 100) < 100:
            # depth 100 needs candidates >= k: vectord's rule max(candidates, k) gives 100.
            chosen["candidates"] = 100
        print(f"\n`lakehouse eval` table with the chosen hybrid (fields sent explicitly): "
              f"{chosen}", flush=True)
        reports = []
        for ds, split, corpus, _ in loaded:
            ing = ings[corpus]
            results, seconds = await run_modes(vc, ec, corpus, ds, ["vector", "lexical", "hybrid"],
                                               ing.model, SearchOptions(hybrid=chosen))
            reports.append(Report(dataset=ds.name, split=split, docs=len(ds.docs),
                                  queries=len(ds.queries), ingest=ing,
                                  query_embed_seconds=seconds, results=results,
                                  settings={"hybrid_options": chosen}))
            print("\n" + reports[-1].table(), flush=True)
        print("\n" + mean_table(reports), flush=True)
    if bm25_rows:
        table("BM25 (lexical nDCG@10)", bm25_rows, names, mark="k1 1.2 b 0.75 title 1.0")
    if prf_rows:
        table("pseudo-relevance feedback, default hybrid end to end (nDCG@10)", prf_rows, names,
              mark="no prf")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
