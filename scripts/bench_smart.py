"""Benchmark query intelligence on LoCoMo's dev half: evidence Recall@5/@10 and p50 latency.

Indexes each conversation's turns as a corpus through the real stack (vectord with its
PostgreSQL in `[vectord] data_dir`, embedd's local model; both in-process unless
running, as `lakehouse eval` does; document vectors cached in var/eval-cache/), once
as spoken and once normalised as `lakehouse ingest --normalize` stores it
(/v1/matrix/normalize's logic: "I" -> the speaker, "yesterday" -> the session's date,
keywords; the original kept in metadata; each turn with the two turns before it and the
one after it in its session). Then
every question of categories 1-4 with evidence is asked of each system, the systems
alternating question by question: plain hybrid search, smart_search and search_auto,
on both indexes, through matrixd's own search path (`run_search`, Deps on real
vectord and embedd clients). A reference row on each index, "hybrid + answer (oracle)",
asks plain hybrid the question with its gold answer appended: no system knows the
answer, so it bounds what any rewriting of the question could add. Prints one table:
R@5 and R@10 per category and overall, and p50 latency; then the deltas against plain
hybrid on the same index.

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_smart.py [--limit N]
    ... scripts/bench_smart.py --window-grid 0:0,1:1,2:2,2:1   # the ingest window, measured

The data is CC BY-NC 4.0 and is read from ../shared/data/locomo (or $LAKEHOUSE_DATA).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from internal.api.matrixd import (
    MatrixSearchRequest,
    SearchAutoRequest,
    SmartSearchRequest,
)
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common.logs import configure
from internal.config import loader
from internal.evaluation import locomo
from internal.evaluation.ingest import ingest
from internal.evaluation.services import services
from internal.matrixd import smart
from internal.matrixd.deps import Deps
from internal.matrixd.search import run_search
from internal.understanding import context, nlp, plan, strategy
from internal.understanding.normalize import Observation, normalize

ROOT = Path(__file__).resolve().parent.parent
CATS = ("multi-hop", "temporal", "open-domain", "single-hop")
K = 10


def data_file() -> Path:
    base = Path(os.environ.get("LAKEHOUSE_DATA") or ROOT.parent / "shared")
    return base / "data" / "locomo" / "locomo_dev.json"


DEFAULT_WINDOW = (context.WINDOW_BEFORE, context.WINDOW_AFTER)


def window_suffix(window: tuple[int, int]) -> str:
    """The normalised index's corpus suffix: "_norm" for the default window."""
    return "_norm" if window == DEFAULT_WINDOW else f"_norm_w{window[0]}{window[1]}"


async def build_indexes(vc: VectordClient, ec: EmbedClient, convs: list[locomo.Conversation],
                        windows: tuple[tuple[int, int], ...] = (DEFAULT_WINDOW,)) -> None:
    pipeline = await asyncio.to_thread(nlp.load)
    cache = ROOT / "var" / "eval-cache"
    for conv in convs:
        docs = [locomo.doc(t) for t in conv.turns]
        rep = await ingest(vc, ec, conv.corpus, docs, cache_dir=cache)
        print(f"{conv.corpus}: {rep.docs} turns, {rep.embedded} embedded "
              f"({rep.from_cache} from cache), {rep.seconds:.0f} s", file=sys.stderr)
        t0 = time.perf_counter()
        obs = [Observation(t.text, t.when, t.speaker) for t in conv.turns]
        normed = await asyncio.to_thread(normalize, pipeline, obs)
        norm_s = time.perf_counter() - t0
        ndocs = [locomo.doc(t, n.text, {"original": t.text, "keywords": n.keywords,
                                        **({"dates": n.dates} if n.dates else {})})
                 for t, n in zip(conv.turns, normed, strict=True)]
        changed = sum(1 for n in normed if n.resolved)
        for window in windows:
            # As `lakehouse ingest --normalize --context B:A` stores them: each turn with
            # the turns around it in its session (context.windows).
            texts = context.windows([d.text for d in ndocs], [t.session for t in conv.turns],
                                    *window)
            mark = f"{window[0]}:{window[1]}"
            wdocs = [d if x == d.text else
                     replace(d, text=x, metadata={**d.metadata, context.WINDOW_KEY: mark})
                     for d, x in zip(ndocs, texts, strict=True)]
            name = conv.corpus + window_suffix(window)
            rep = await ingest(vc, ec, name, wdocs, cache_dir=cache)
            print(f"{name}: normalised in {norm_s:.1f} s ({changed} turns changed), window "
                  f"{mark}, {rep.embedded} embedded ({rep.from_cache} from cache), "
                  f"{rep.seconds:.0f} s", file=sys.stderr)


async def window_grid(vc: VectordClient, ec: EmbedClient, cfg: Any,
                      convs: list[locomo.Conversation], windows: tuple[tuple[int, int], ...],
                      limit: int) -> str:
    """Plain hybrid on the spoken index and on the normalised index at each window."""
    await build_indexes(vc, ec, convs, windows)
    deps = Deps(cfg=cfg.matrixd, vectord=vc, embed=ec)
    names = {"spoken": ""} | {f"normalised, window {b}:{a}": window_suffix((b, a))
                              for b, a in windows}
    rows: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n in names}
    for conv in convs:
        for q in conv.questions[:limit] if limit else conv.questions:
            for name, suffix in names.items():
                out = msgspec.to_builtins(await run_search(deps, MatrixSearchRequest(
                    corpora=[conv.corpus + suffix], query_text=q.text, k=K)))
                ids = [str(h["id"]) for h in out["hits"]]
                for k in (5, 10):
                    r = locomo.recall(ids, q.evidence, k)
                    rows[name][f"{q.category}@{k}"].append(r)
                    rows[name][f"all@{k}"].append(r)
    head = ["plain hybrid on", *[f"{c} R@10" for c in CATS], "overall R@5", "overall R@10"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, per in rows.items():
        lines.append("| " + " | ".join([name, *[f"{statistics.fmean(per[f'{c}@10']):.3f}"
                                                 for c in CATS],
                                          f"{statistics.fmean(per['all@5']):.3f}",
                                          f"{statistics.fmean(per['all@10']):.3f}"]) + " |")
    return "\n".join(lines)


System = Callable[[Deps, str, locomo.Question], Awaitable[Any]]  # a matrixd answer struct
ORACLE = "hybrid + answer (oracle)"


def systems(costs: dict[str, strategy.CostModel]) -> dict[str, System]:
    async def hybrid(deps: Deps, corpus: str, q: locomo.Question) -> Any:
        return await run_search(deps, MatrixSearchRequest(corpora=[corpus], query_text=q.text,
                                                          k=K))

    async def smart_(deps: Deps, corpus: str, q: locomo.Question) -> Any:
        return await smart.smart_search(deps, SmartSearchRequest(query_text=q.text,
                                                                 corpora=[corpus], k=K))

    def auto(index: str) -> System:
        async def run(deps: Deps, corpus: str, q: locomo.Question) -> Any:
            return await smart.search_auto(deps, SearchAutoRequest(query_text=q.text,
                                                                   corpora=[corpus], k=K),
                                           costs[index])
        return run

    async def oracle(deps: Deps, corpus: str, q: locomo.Question) -> Any:
        # A reference no system can be: plain hybrid asked the question with its gold answer
        # appended, i.e. the most any rewriting of the question could add to it.
        return await run_search(deps, MatrixSearchRequest(
            corpora=[corpus], query_text=f"{q.text} {q.answer}", k=K))

    out: dict[str, System] = {}
    for index, suffix in (("raw", ""), ("norm", "_norm")):
        for name, fn in (("hybrid", hybrid), ("smart_search", smart_), ("search_auto", auto(index)),
                         (ORACLE, oracle)):
            out[f"{name}{' (normalized)' if suffix else ''}"] = _on(fn, suffix)
    return out


def _on(fn: System, suffix: str) -> System:
    async def run(deps: Deps, corpus: str, q: locomo.Question) -> Any:
        return await fn(deps, corpus + suffix, q)
    return run


def table(rows: dict[str, dict[str, list[float]]], lat: dict[str, list[float]],
          strategies: dict[str, dict[str, int]]) -> str:
    head = ["system", *[f"{c} R@5/R@10" for c in CATS], "overall R@5", "overall R@10", "p50 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    summary: dict[str, dict[str, float]] = {}
    for name, per in rows.items():
        cells = [name]
        s: dict[str, float] = {}
        for c in CATS:
            r5, r10 = statistics.fmean(per[f"{c}@5"]), statistics.fmean(per[f"{c}@10"])
            s[f"{c}@10"] = r10
            cells.append(f"{r5:.3f} / {r10:.3f}")
        o5, o10 = statistics.fmean(per["all@5"]), statistics.fmean(per["all@10"])
        s["all@10"], s["p50"] = o10, statistics.median(lat[name])
        cells += [f"{o5:.3f}", f"{o10:.3f}", f"{s['p50']:.1f}"]
        summary[name] = s
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for suffix in ("", " (normalized)"):
        base = summary[f"hybrid{suffix}"]
        for name in (f"smart_search{suffix}", f"search_auto{suffix}", f"{ORACLE}{suffix}"):
            if name not in summary:
                continue
            s = summary[name]
            d = {k: s[k] - base[k] for k in ("all@10", "multi-hop@10", "temporal@10",
                                              "single-hop@10")}
            lines.append(f"{name} vs hybrid{suffix}: overall R@10 {d['all@10']:+.3f}, multi-hop "
                         f"{d['multi-hop@10']:+.3f}, temporal {d['temporal@10']:+.3f}, single-hop "
                         f"{d['single-hop@10']:+.3f}; p50 {s['p50'] / base['p50']:.2f}x hybrid")
    raw = summary["hybrid"]
    nt = summary["smart_search (normalized)"]["temporal@10"] - raw["temporal@10"]
    lines.append(f"smart_search (normalized) temporal R@10 vs plain hybrid: {nt:+.3f}")
    for suffix in ("", " (normalized)"):
        lines.append(f"search_auto{suffix} p50 / smart_search{suffix} p50: "
                     f"{summary['search_auto' + suffix]['p50'] / summary['smart_search' + suffix]['p50']:.2f}")
    for name, counts in strategies.items():
        lines.append(f"{name} strategies: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="questions per conversation (0: all)")
    ap.add_argument("--only", default="", help="comma-separated system names to run")
    ap.add_argument("--keep-top", type=int, default=None,
                    help=f"smart merge: the question's first N hits keep their places "
                         f"(default plan.KEEP_TOP = {plan.KEEP_TOP})")
    ap.add_argument("--window-grid", default="",
                    help="instead of the systems: plain hybrid on the normalised index built "
                         "with each window, e.g. 0:0,1:1,2:2,2:1 (BEFORE:AFTER)")
    args = ap.parse_args()
    grid: tuple[tuple[int, int], ...] = tuple(
        (int(b), int(a)) for b, a in (w.strip().split(":") for w in args.window_grid.split(",")
                                      if w.strip()))
    if args.keep_top is not None:
        plan.KEEP_TOP = args.keep_top
    path = data_file()
    if not path.is_file():
        print(f"not run: data absent ({path})", file=sys.stderr)
        return 1
    configure("warning", "console")
    cfg = loader.load()
    convs = locomo.load(path)
    # In-process daemons: a stack running on the default ports may be someone else's.
    async with services(cfg, in_process=True) as ep, aiohttp.ClientSession() as session:
        vc = VectordClient(session, ep.vectord_url, 300.0)
        ec = EmbedClient(session, ep.embedd_url, 300.0)
        if grid:
            print(f"LoCoMo dev half: {len(convs)} conversations, plain hybrid, k={K}")
            print(await window_grid(vc, ec, cfg, convs, grid, args.limit))
            return 0
        await build_indexes(vc, ec, convs)
        deps = Deps(cfg=cfg.matrixd, vectord=vc, embed=ec)
        costs = {"raw": strategy.CostModel(), "norm": strategy.CostModel()}
        runs = systems(costs)
        if args.only:
            keep = {s.strip() for s in args.only.split(",")}
            runs = {k: v for k, v in runs.items() if k in keep}
        rows: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n in runs}
        lat: dict[str, list[float]] = {n: [] for n in runs}
        strategies: dict[str, dict[str, int]] = {n: defaultdict(int) for n in runs
                                                 if n.startswith("search_auto")}
        names = list(runs)
        asked = 0
        for conv in convs:
            qs = conv.questions[:args.limit] if args.limit else conv.questions
            for i, q in enumerate(qs):
                order = names[i % len(names):] + names[:i % len(names)]  # alternate who goes first
                for name in order:
                    t0 = time.perf_counter()
                    answer = await runs[name](deps, conv.corpus, q)
                    lat[name].append((time.perf_counter() - t0) * 1000)
                    out = msgspec.to_builtins(answer)  # the answer as its JSON says it
                    ids = [str(h["id"]) for h in out["hits"]]
                    for k in (5, 10):
                        r = locomo.recall(ids, q.evidence, k)
                        rows[name][f"{q.category}@{k}"].append(r)
                        rows[name][f"all@{k}"].append(r)
                    if name in strategies:
                        strategies[name][str(out.get("strategy"))] += 1
                asked += 1
                if asked % 50 == 0:
                    print(f"{asked} questions", file=sys.stderr)
        print(f"LoCoMo dev half: {len(convs)} conversations, {asked} questions with evidence "
              f"(categories 1-4), k={K}")
        print(table(rows, lat, strategies))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
