"""A million 384-d items through the product: load, build, filtered searches, a cold start.

1,000,000 items with their own vectors (bench/data/vectors.py `spectral_mixture`: 1,000
centres, the noise's spectrum matched to real MiniLM embeddings' local intrinsic
dimension; --alpha -1: the isotropic mixture, a harder set) and metadata (tags t50, t10,
t1, t01 held by 50%, 10%, 1% and 0.1% of the items, a date, a number, a keyword) loaded
through the gateway's write routes (1,000 a call, --writers at once, the corpus's graph
deferred; the request bodies encoded before the clock starts), then its HNSW graph built
(POST .../index). Searches through the gateway (vector mode, k 10): unfiltered and with
each tag filter, at each ef_search of --sweep and at the corpus's default: recall@10
against the exact top 10 of the items the filter keeps (float32; unfiltered also against
the float16-rounded truth), the share of searches with k hits, p50 / p95 one at a time and
QPS at concurrency 8. The filters at 1% and 0.1% again with the exact plan off
(exact_scan_rows 0: pgvector's iterative scans alone). Memory after a restart (vectord's
PSS, PostgreSQL's held memory, the page cache of its files), disk, the relations' sizes.
Then the stack stopped, its files dropped from the page cache, started again: the first
100 searches' p50 / p95 (cold). The data and its truth are cached in --cache.

Targets (docs/decisions/0302-a-million-through-the-product.md): load >= 10,000 items/s;
build <= 200 s; recall@10 >= 0.95 at the default ef_search with p95 <= 20 ms warm and
<= 100 ms cold; filtered recall at 1% and 0.1% >= 0.95 with k hits.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import numpy as np
import psycopg

from bench.data.vectors import exact_top, item_id, mixture, spectral_mixture
from bench.harness import Run
from bench.harness.http import CORPORA, call, post, session
from bench.harness.memory import drop_page_cache
from bench.harness.stacks import ROOT
from bench.harness.timing import pct, qps
from internal.pg import memory

OPTIONS = {"n": 1_000_000, "centres": 1000, "writers": 4, "queries": 200, "qps_calls": 400,
           "alpha": (0.8, "the noise's power-law spectrum (0.8: real MiniLM's LID; -1: isotropic)"),
           "sweep": "40,64,100,200,400,800",
           "index": ("", "the corpus's index settings, e.g. m=16,ef_construction=64,ef_search=100"),
           "cache": (str(ROOT / "var" / "bench-million"), "where the data and its truth are kept")}
QUICK = {"n": 20_000, "centres": 20, "queries": 40, "qps_calls": 80, "sweep": "40,100"}
DIM, K, CORPUS = 384, 10, "million"
TAGS = {"50%": ("t50", 0.5), "10%": ("t10", 0.1), "1%": ("t1", 0.01), "0.1%": ("t01", 0.001)}
FILTERS = ["none", *TAGS]
MIB = 2**20


def data(run: Run) -> Path:
    """The vectors, queries, tags and truths of these options, made once."""
    a = run.args
    where = Path(a.cache) / f"n{a.n}-c{a.centres}-a{a.alpha}"
    if (where / "truth.npz").exists():
        return where
    where.mkdir(parents=True, exist_ok=True)
    run.progress(f"making the data in {where}")
    pts = (mixture(a.n + 1000, DIM, a.centres, 42) if a.alpha < 0
           else spectral_mixture(a.n + 1000, DIM, a.centres, 42, a.alpha))
    qs, vecs = pts[:1000], pts[1000:]
    rng = np.random.default_rng(7)
    tags = {tag: rng.random(a.n) < share for tag, share in TAGS.values()}
    truth: dict[str, Any] = {"none": exact_top(vecs, qs[:a.queries], K, block=25)}
    rounded = vecs.astype(np.float16).astype(np.float32)
    truth["none_f16"] = exact_top(rounded, qs[:a.queries].astype(np.float16).astype(np.float32),
                                  K, block=25)
    for name, (tag, _) in TAGS.items():
        rows = np.flatnonzero(tags[tag])
        truth[name] = rows[exact_top(vecs[rows], qs[:a.queries], K, block=25)]
    np.save(where / "data.npy", vecs)
    np.save(where / "queries.npy", qs)
    np.savez(where / "tags.npz", **tags)
    np.savez(where / "truth.npz", **truth)
    return where


def bodies(where: Path, n: int) -> list[bytes]:
    """The upsert bodies, 1,000 items each: the vector (7 decimals), three words of a
    10,000-word Zipf vocabulary, the tags, a keyword, a number and a date."""
    vecs = np.load(where / "data.npy", mmap_mode="r")
    tags = np.load(where / "tags.npz")
    names = list(tags.keys())
    flags = np.stack([tags[t] for t in names], axis=1)
    rng = np.random.default_rng(11)
    kw, num, day = rng.integers(0, 1000, n), rng.random(n) * 1000, rng.integers(0, 2000, n)
    words = np.minimum(rng.zipf(1.3, (n, 3)), 10_000)
    enc = msgspec.json.Encoder()
    out = []
    for start in range(0, n, 1000):
        block = np.round(np.asarray(vecs[start:start + 1000], dtype=np.float64), 7).tolist()
        out.append(enc.encode({"items": [{
            "id": item_id(i), "vector": block[i - start], "language": "english",
            "text": "w{} w{} w{}".format(*words[i]),
            "tags": [names[j] for j in np.flatnonzero(flags[i])],
            "metadata": {"kw": f"kw{kw[i]}", "n": round(float(num[i]), 3),
                         "date": f"{2020 + day[i] // 365}-{1 + day[i] % 12:02d}-{1 + day[i] % 28:02d}"}}
            for i in range(start, min(start + 1000, n))]}))
    return out


async def load(run: Run, http: aiohttp.ClientSession, base: str, where: Path) -> None:
    a = run.args
    index = {k: int(v) for k, v in (p.split("=") for p in a.index.split(",") if p)}
    await post(http, f"{base}{CORPORA}", {"name": CORPUS, "dim": DIM, "language": "english",
                                          "defer_index": True, **({"index": index} if index else {})})
    run.progress("encoding the bodies")
    todo = iter(bodies(where, a.n))
    url = f"{base}{CORPORA}/{CORPUS}/items"

    async def writer() -> None:
        for body in todo:
            async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                if r.status != 200:
                    raise SystemExit(f"upsert answered {r.status}: {(await r.read())[:500]!r}")

    run.progress("loading")
    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(a.writers)))
    load_s = time.perf_counter() - started
    run.progress("building the graph")
    started = time.perf_counter()
    built = await post(http, f"{base}{CORPORA}/{CORPUS}/index")
    build_s = time.perf_counter() - started
    corpus = await call(http, "GET", f"{base}{CORPORA}/{CORPUS}")
    run.say(f"loaded {a.n:,} items through the gateway ({a.writers} writers, 1,000 a call) in "
            f"{load_s:.1f} s: **{a.n / load_s:,.0f} items/s**; HNSW build {build_s:.1f} s "
            f"({built['seconds']} s in vectord); index {corpus['index']}",
            load_s=load_s, items_per_s=a.n / load_s, build_s=build_s, index=corpus["index"])


class Searcher:
    def __init__(self, run: Run, http: aiohttp.ClientSession, base: str, where: Path) -> None:
        self.run, self.http, self.url = run, http, f"{base}{CORPORA}/{CORPUS}/search"
        self.qs = np.load(where / "queries.npy")
        self.truth = np.load(where / "truth.npz")

    def body(self, i: int, ef: int | None, flt: str) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": "vector", "k": K,
                               "query_vector": [round(float(x), 7) for x in self.qs[i]]}
        if ef is not None:
            out["ef_search"] = ef
        if flt != "none":
            out["filter"] = {"tags_any": [TAGS[flt][0]]}
        return out

    async def ask(self, body: dict[str, Any]) -> list[str]:
        async with self.http.post(self.url, json=body) as r:
            out = await r.json()
            if r.status != 200:
                raise SystemExit(f"search answered {r.status}: {out}")
        return [h["id"] for h in out["hits"]]

    async def one_at_a_time(self, rows: range, ef: int | None, flt: str
                            ) -> tuple[list[float], list[list[str]]]:
        ms, found = [], []
        for i in rows:
            body = self.body(i, ef, flt)
            t = time.perf_counter()
            found.append(await self.ask(body))
            ms.append((time.perf_counter() - t) * 1000)
        return ms, found

    def recall(self, found: list[list[str]], truth: str) -> float:
        t = self.truth[truth]
        return sum(len({item_id(int(j)) for j in t[i]} & set(f))
                   for i, f in enumerate(found)) / (len(found) * K)

    async def measure(self, ef: int | None, flt: str) -> dict[str, Any]:
        a = self.run.args
        await self.one_at_a_time(range(a.queries, a.queries + 30), ef, flt)  # warm
        ms, found = await self.one_at_a_time(range(a.queries), ef, flt)
        bodies = [self.body(i, ef, flt) for i in range(a.queries)]
        rate = await qps(self.ask, [bodies[i % len(bodies)] for i in range(a.qps_calls)], 8)
        return {"recall": self.recall(found, flt), "f16": self.recall(found, "none_f16")
                if flt == "none" else None, "k_hits": sum(len(f) == K for f in found) / len(found),
                "p50": pct(ms, 50), "p95": pct(ms, 95), "qps": rate}


async def sweep(run: Run, s: Searcher, base: str) -> dict[str, dict[str, Any]]:
    efs: list[int | None] = [int(e) for e in run.args.sweep.split(",")]
    got: dict[str, dict[str, Any]] = {}
    for ef in [*efs, None]:
        for flt in FILTERS:
            got[f"{ef}/{flt}"] = await s.measure(ef, flt)
            run.progress(f"ef {ef} {flt}: {got[f'{ef}/{flt}']}")
    rows = [(ef or "default", flt, r["recall"], "" if r["f16"] is None else r["f16"],
             r["k_hits"], r["p50"], r["p95"], r["qps"])
            for ef in [*efs, None] for flt in FILTERS if (r := got[f"{ef}/{flt}"])]
    run.table("vector search through the gateway, k 10: recall@10 against the exact top 10 "
              "of the items the filter keeps (float32; unfiltered also against the "
              "float16-rounded truth), share of searches with k hits, one at a time, QPS at 8",
              ["ef_search", "filter", "recall@10:.4f", "recall (f16 truth):.4f",
               "k hits:.2f", "p50 ms:.2f", "p95 ms:.2f", "QPS at 8:.0f"], rows)
    for flt in FILTERS:
        run.series(f"recall against QPS, filter {flt}",
                   [[got[f"{e}/{flt}"]["qps"], got[f"{e}/{flt}"]["recall"]] for e in efs])
    plain: list[tuple[Any, ...]] = []
    settings = f"{base}{CORPORA}/{CORPUS}/index/settings"
    kept = (await call(s.http, "GET", f"{base}{CORPORA}/{CORPUS}"))["index"]["exact_scan_rows"]
    await post(s.http, settings, {"exact_scan_rows": 0})
    for ef in (40, 100, 400):
        for flt in ("1%", "0.1%"):
            r = await s.measure(ef, flt)
            plain.append((ef, flt, r["recall"], r["k_hits"], r["p50"], r["p95"]))
    await post(s.http, settings, {"exact_scan_rows": kept})
    run.table("filtered, pgvector's iterative scan alone (exact_scan_rows 0)",
              ["ef_search", "filter", "recall@10:.4f", "k hits:.2f", "p50 ms:.2f", "p95 ms:.2f"],
              plain)
    return got


def held_memory(run: Run, stack: Any) -> None:
    """What the stack holds after a start and the searches: vectord's PSS, PostgreSQL's
    held memory, the page cache of its files, the disk and the relations."""
    vd = memory.usage(stack.daemon("vectord").pid)
    pg = memory.postgres_memory(stack.data_dir)
    cached = memory.page_cache([stack.data_dir])
    du = sum(f.stat().st_size for f in stack.data_dir.rglob("*") if f.is_file())
    with psycopg.connect(stack.dsn) as conn:
        rels = conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c WHERE c.relname LIKE "
            "'vectord_items_%' AND pg_relation_size(c.oid) > 1048576 ORDER BY 2 DESC").fetchall()
    run.table("memory and disk after the sweep", ["what", "MiB:.0f"], [
        ("vectord PSS", vd.pss / MIB), ("PostgreSQL held (processes' own + shared, once)",
                                         (pg.held if pg else 0) / MIB),
        ("page cache of PostgreSQL's files", cached / MIB), ("data directory on disk", du / MIB),
        *((f"relation {name}", size / MIB) for name, size in rels)])


async def main(run: Run) -> None:
    where = data(run)
    env = {"LAKEHOUSE_GATEWAY_VECTORS_TIMEOUT": "3600"}
    async with session(concurrency=16) as http:
        with run.stack(env) as stack:
            await load(run, http, stack.gateway, where)
            await sweep(run, Searcher(run, http, stack.gateway, where), stack.gateway)
        with run.stack(env) as stack:  # the same data directory, started again
            searcher = Searcher(run, http, stack.gateway, where)
            await searcher.one_at_a_time(range(300, 400), None, "none")
            held_memory(run, stack)
        left = drop_page_cache(stack.data_dir)
        started = time.perf_counter()
        with run.stack(env) as stack:
            up_s = time.perf_counter() - started
            searcher = Searcher(run, http, stack.gateway, where)
            ms, _ = await searcher.one_at_a_time(range(500, 600), None, "none")
            ms1, _ = await searcher.one_at_a_time(range(600, 700), None, "1%")
        run.table(f"cold: stopped, its files dropped from the page cache ({left / MIB:.0f} MiB "
                  f"left), started again ({up_s:.1f} s to up); the first 100 searches",
                  ["searches", "first ms:.1f", "p50 ms:.2f", "p95 ms:.2f", "max ms:.1f"],
                  [("unfiltered", ms[0], pct(ms, 50), pct(ms, 95), max(ms)),
                   ("filter 1%, after them", ms1[0], pct(ms1, 50), pct(ms1, 95), max(ms1))])
