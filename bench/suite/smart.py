"""Query intelligence on LoCoMo's dev half: evidence Recall@5/@10 and p50 latency.

Each conversation's turns indexed as a corpus through vectord and embedd in-process, once
as spoken and once normalised as `lakehouse ingest --normalize` stores it
(bench/data/locomo.py). Every question of categories 1-4 with evidence asked of each
system, the systems alternating question by question: plain hybrid search, smart_search
and search_auto, on both indexes, through matrixd's own search path (`run_search`, Deps on
real vectord and embedd clients). A reference row on each index, "hybrid + answer
(oracle)", asks plain hybrid the question with its gold answer appended: the most any
rewriting of the question could add. R@5 and R@10 per category and overall, p50 latency,
and the deltas against plain hybrid on the same index. --window-grid 0:0,1:1,2:2 instead
compares plain hybrid on the normalised index built with each ingest window.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import msgspec

from bench.data import locomo as data
from bench.harness import Run
from bench.harness.timing import rotated
from internal.api.matrixd import MatrixSearchRequest, SearchAutoRequest, SmartSearchRequest
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common.logs import configure
from internal.config import loader
from internal.evaluation import locomo
from internal.evaluation.services import services
from internal.matrixd import smart
from internal.matrixd.deps import Deps
from internal.matrixd.search import run_search
from internal.understanding import plan, strategy

OPTIONS = {"limit": (0, "questions a conversation (0: all)"), "only": ("", "systems to run, comma-separated"),
           "keep_top": (-1, "smart merge: the question's first N hits keep their places (-1: plan.KEEP_TOP)"),
           "window_grid": ("", "plain hybrid on the index built with each window, e.g. 0:0,1:1")}
QUICK = {"limit": 10}
CATS, K, ORACLE = ("multi-hop", "temporal", "open-domain", "single-hop"), 10, "hybrid + answer (oracle)"
System = Callable[[Deps, str, locomo.Question], Awaitable[Any]]


def hybrid_on(sfx: str) -> System:
    """Plain hybrid on the index of that suffix."""
    return lambda d, c, q: run_search(d, MatrixSearchRequest(corpora=[c + sfx], query_text=q.text, k=K))


def systems(costs: dict[str, strategy.CostModel]) -> dict[str, System]:
    def hybrid(d: Deps, c: str, q: locomo.Question) -> Awaitable[Any]:
        return run_search(d, MatrixSearchRequest(corpora=[c], query_text=q.text, k=K))

    def smart_(d: Deps, c: str, q: locomo.Question) -> Awaitable[Any]:
        return smart.smart_search(d, SmartSearchRequest(query_text=q.text, corpora=[c], k=K))

    def oracle(d: Deps, c: str, q: locomo.Question) -> Awaitable[Any]:
        return run_search(d, MatrixSearchRequest(corpora=[c], query_text=f"{q.text} {q.answer}", k=K))
    out: dict[str, System] = {}
    for index, sfx in (("raw", ""), ("norm", "_norm")):
        def auto(d: Deps, c: str, q: locomo.Question, index: str = index) -> Awaitable[Any]:
            return smart.search_auto(d, SearchAutoRequest(query_text=q.text, corpora=[c], k=K), costs[index])
        for name, fn in (("hybrid", hybrid), ("smart_search", smart_), ("search_auto", auto), (ORACLE, oracle)):
            out[f"{name}{' (normalized)' if sfx else ''}"] = (
                lambda d, c, q, fn=fn, sfx=sfx: fn(d, c + sfx, q))
    return out


def score(rows: dict[str, dict[str, list[float]]], name: str, ids: list[str], q: locomo.Question) -> None:
    for k in (5, 10):
        r = locomo.recall(ids, q.evidence, k)
        rows[name][f"{q.category}@{k}"].append(r)
        rows[name][f"all@{k}"].append(r)


async def main(run: Run) -> None:
    a = run.args
    if a.keep_top >= 0:
        plan.KEEP_TOP = a.keep_top
    run.need(*data.FILE)
    configure("warning", "console")
    cfg, convs = loader.load(), data.conversations(run.data)
    grid = tuple((int(b), int(x)) for b, x in (w.split(":") for w in a.window_grid.split(",") if w.strip()))
    async with services(cfg, in_process=True) as ep, aiohttp.ClientSession() as session:
        vc, ec = VectordClient(session, ep.vectord_url, 300.0), EmbedClient(session, ep.embedd_url, 300.0)
        await data.index(vc, ec, convs, grid or (data.DEFAULT_WINDOW,))
        deps = Deps(cfg=cfg.matrixd, vectord=vc, embed=ec)
        if grid:
            runs: dict[str, System] = {"spoken": hybrid_on("")}
            runs |= {f"normalised, window {b}:{x}": hybrid_on(data.suffix((b, x))) for b, x in grid}
        else:
            runs = systems({"raw": strategy.CostModel(), "norm": strategy.CostModel()})
        if a.only:
            runs = {k: v for k, v in runs.items() if k in {s.strip() for s in a.only.split(",")}}
        rows: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n in runs}
        lat: dict[str, list[float]] = {n: [] for n in runs}
        strategies: dict[str, dict[str, int]] = {n: defaultdict(int) for n in runs if n.startswith("search_auto")}
        asked = 0
        for conv in convs:
            for i, q in enumerate(conv.questions[:a.limit or None]):
                for name in rotated(list(runs), i):  # who goes first alternates
                    t0 = time.perf_counter()
                    out = msgspec.to_builtins(await runs[name](deps, conv.corpus, q))
                    lat[name].append((time.perf_counter() - t0) * 1000)
                    score(rows, name, [str(h["id"]) for h in out["hits"]], q)
                    if name in strategies:
                        strategies[name][str(out.get("strategy"))] += 1
                asked += 1
    report(run, rows, lat, strategies, f"LoCoMo dev half: {len(convs)} conversations, {asked} questions "
           f"with evidence (categories 1-4), k={K}")


def report(run: Run, rows: dict[str, dict[str, list[float]]], lat: dict[str, list[float]],
           strategies: dict[str, dict[str, int]], title: str) -> None:
    mean = statistics.fmean
    run.table(title, ["system", *(f"{c} R@5/R@10" for c in CATS), "overall R@5:.3f", "overall R@10:.3f",
                      "p50 ms:.1f"],
              [(n, *(f"{mean(p[f'{c}@5']):.3f} / {mean(p[f'{c}@10']):.3f}" for c in CATS),
                mean(p["all@5"]), mean(p["all@10"]), statistics.median(lat[n])) for n, p in rows.items()])
    s = {n: {k: mean(v) for k, v in p.items()} | {"p50": statistics.median(lat[n])} for n, p in rows.items()}
    for sfx in ("", " (normalized)"):
        if (base := s.get(f"hybrid{sfx}")) is None:
            continue
        for name in (f"smart_search{sfx}", f"search_auto{sfx}", f"{ORACLE}{sfx}"):
            if name in s:
                d = {k: s[name][k] - base[k] for k in ("all@10", "multi-hop@10", "temporal@10", "single-hop@10")}
                run.say(f"{name} vs hybrid{sfx}: overall R@10 {d['all@10']:+.3f}, multi-hop {d['multi-hop@10']:+.3f}, "
                        f"temporal {d['temporal@10']:+.3f}, single-hop {d['single-hop@10']:+.3f}; p50 "
                        f"{s[name]['p50'] / base['p50']:.2f}x hybrid", **{f"{name} R@10 delta": d["all@10"]})
    if "hybrid" in s and "smart_search (normalized)" in s:
        run.say(f"smart_search (normalized) temporal R@10 vs plain hybrid: "
                f"{s['smart_search (normalized)']['temporal@10'] - s['hybrid']['temporal@10']:+.3f}")
    for sfx in ("", " (normalized)"):
        if f"search_auto{sfx}" in s and f"smart_search{sfx}" in s:
            run.say(f"search_auto{sfx} p50 / smart_search{sfx} p50: "
                    f"{s['search_auto' + sfx]['p50'] / s['smart_search' + sfx]['p50']:.2f}")
    for name, counts in strategies.items():
        run.say(f"{name} strategies: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
