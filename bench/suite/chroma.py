"""Lakehouse's vectord against the Chroma server, 100k x 384, in one run: recall, latency,
QPS, load time and memory.

The same Gaussian mixture (1,000 centres, seed 42, L2-normalised), 1,000 queries, k 10.
Lakehouse: an embedded PostgreSQL and vectord over HTTP, each profile of --lakehouse in its
own data directory (its HNSW index deferred during the load, then built). Chroma: `chroma
run` from its own virtual environment (bench/peers/chroma.py), loaded through its client,
then its ef_search tuned: the smallest of CHROMA_EF whose recall@10 reaches the first
Lakehouse profile's (less 0.0005). Then rounds, each system in turn (the order rotated):
the queries one at a time (p50, p95) and twice as many at concurrency 8 (QPS); Chroma both
through raw HTTP (the same aiohttp client) and through its own client. Memory after the
rounds: vectord's PSS plus PostgreSQL's held memory (its processes' own pages and its
shared segment's resident pages, once), Chroma's server's PSS; the page cache apart.

Targets: memory <= 1.00x Chroma's, QPS >= 1.50x, recall@10 >= 0.998.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np
import psycopg

from bench.data.vectors import exact_top, item_id, mixture, recall
from bench.harness import Run
from bench.harness import memory as mem
from bench.harness.http import CORPORA, post, session
from bench.harness.pg import corpus_id
from bench.harness.stacks import daemon
from bench.harness.timing import one_at_a_time, pct, qps, rotated
from bench.peers.chroma import VERSION, Chroma
from internal.pg import embedded

OPTIONS = {"n": 100_000, "dim": 384, "queries": 1000, "rounds": 3,
           "lakehouse": ("default,float32,before", "profiles, comma-separated")}
QUICK = {"n": 20_000, "queries": 200, "rounds": 1, "lakehouse": "default"}
K, CONCURRENCY, SLACK, CORPUS = 10, 8, 0.0005, "bench_chroma"
CHROMA_EF = (10, 16, 24, 32, 48, 64, 100, 128, 200)
# precision (None: vectord's default), PostgreSQL settings, vectord's environment, a note
PROFILES: dict[str, tuple[str | None, dict[str, str], dict[str, str], str]] = {
    "default": (None, {}, {}, "as shipped: float16"),
    "float32": ("float32", {}, {}, '"precision": "float32" at creation, else as shipped'),
    "before": ("float32", {"shared_buffers": "512MB"}, {"LAKEHOUSE_VECTORD_POOL_MIN": "2",
               "LAKEHOUSE_VECTORD_POOL_MAX": "10"}, "as shipped before precisions")}


async def main(run: Run) -> None:
    a = run.args
    names = a.lakehouse.split(",")
    pts = mixture(a.n + a.queries, a.dim, 1000, 42)
    queries, data = pts[:a.queries], pts[a.queries:]
    truth = exact_top(data, queries, K)
    np.save(run.folder / "data.npy", data)
    np.save(run.folder / "queries.npy", queries)
    qlists = [q.tolist() for q in queries]
    with contextlib.ExitStack() as held:
        houses: dict[str, Any] = {}
        for name in names:
            _, settings, env, _ = PROFILES[name]
            pg = embedded.start(run.folder / name / "pg", settings=settings)
            held.callback(pg.stop)
            vd = held.enter_context(daemon("vectord", {"LAKEHOUSE_PG_DSN": pg.dsn,
                                                       "LAKEHOUSE_LOG_LEVEL": "warning", **env}, path="/readyz"))
            houses[name] = (pg, vd, {})
        chroma = Chroma(run.folder / "chroma")
        held.callback(chroma.stop)
        async with session(32) as http:
            for name, (pg, vd, info) in houses.items():
                c = f"{vd.base}{CORPORA}"
                spec = {"name": CORPUS, "dim": a.dim, "metric": "cosine", "language": "english",
                        "model": "bench", "defer_index": True}
                if PROFILES[name][0]:
                    spec["precision"] = PROFILES[name][0]
                await post(http, c, spec)
                t = time.perf_counter()
                for s in range(0, len(data), 1000):
                    await post(http, f"{c}/{CORPUS}/items", {"model": "bench", "items": [
                        {"id": item_id(s + i), "vector": v.tolist(), "text": f"point {s + i}"}
                        for i, v in enumerate(data[s:s + 1000])]})
                info["load_s"], t = time.perf_counter() - t, time.perf_counter()
                await post(http, f"{c}/{CORPUS}/index", {})
                info["build_s"] = time.perf_counter() - t
                with psycopg.connect(pg.dsn, autocommit=True) as conn:
                    conn.execute(f"VACUUM ANALYZE vectord_items_{corpus_id(pg.dsn, CORPUS)}")
            loaded = chroma.load(run.folder / "data.npy")
            run.say(f"chroma {VERSION}: {loaded['count']} vectors, hnsw {loaded['configuration']}")

            def query(name: str) -> Any:
                if name.startswith("chroma"):
                    return lambda i: post(http, chroma.url, chroma.body(qlists[i % a.queries], K))
                url = f"{houses[name][1].base}{CORPORA}/{CORPUS}/search"
                return lambda i: post(http, url, {"mode": "vector", "query_vector": qlists[i % a.queries], "k": K})

            def ids(name: str, out: Any) -> list[str]:
                return list(out["ids"][0]) if name.startswith("chroma") else [h["id"] for h in out["hits"]]

            async def found(name: str) -> list[list[str]]:
                return [ids(name, await query(name)(i)) for i in range(a.queries)]
            target = recall(await found(names[0]), truth) - SLACK
            sweep = {}
            for ef in CHROMA_EF:
                chroma.ef(ef)
                sweep[ef] = recall(await found("chroma"), truth)
            ef = next((e for e in CHROMA_EF if sweep[e] >= target), CHROMA_EF[-1])
            chroma.ef(ef)
            run.say("chroma recall@10 by ef_search (raw HTTP): " + ", ".join(f"{e}: {r:.4f}" for e, r in sweep.items())
                    + f"; matched (>= {target:.4f}): {ef}")
            systems = [*names, "chroma (raw HTTP)", "chroma (client)"]
            ms: dict[str, list[float]] = {s: [] for s in systems}
            rates: dict[str, list[float]] = {s: [] for s in systems}
            got_ids: dict[str, list[list[str]]] = {}
            for s in systems[:-1]:
                await one_at_a_time(query(s), range(50))
            for rnd in range(a.rounds):
                for s in rotated(systems, rnd):
                    if s == "chroma (client)":  # in its own process: Chroma's client is not ours
                        one = chroma.client("query", "--data", str(run.folder / "queries.npy"))
                        ms[s] += one["ms"]
                        got_ids.setdefault(s, one["ids"])
                        rates[s].append(float(chroma.client("query", "--data", str(run.folder / "queries.npy"),
                                                            "--concurrency", str(CONCURRENCY))["qps"]))
                        continue
                    ms[s] += await one_at_a_time(query(s), range(a.queries))
                    got_ids.setdefault(s, await found(s))
                    rates[s].append(await qps(query(s), range(a.queries * 2), CONCURRENCY))
        cmem = mem.usage(chroma.proc.pid)
        rows, c_qps = [], float(np.median(rates["chroma (raw HTTP)"]))
        for s in systems:
            if s in houses:
                pg, vd, info = houses[s]
                v, p = mem.usage(vd.proc.pid), mem.postgres_memory(pg.data_dir)
                used, parts, load = v.pss + p.held, f"vectord {v.pss / mem.MIB:.0f} + PostgreSQL {p.held / mem.MIB:.0f}", \
                    info["load_s"] + info["build_s"]
            else:
                used, parts, load = cmem.pss, "server", float(loaded["seconds"])
            q = float(np.median(rates[s]))
            rows.append((s if s in houses else f"{s}, ef_search {ef}", recall(got_ids[s], truth), pct(ms[s], 50),
                         pct(ms[s], 95), q, load, f"{used / mem.MIB:.0f} ({parts})", used / cmem.pss, q / c_qps))
    run.table(f"data: {a.n} x {a.dim}, 1,000 centres, seed 42; {a.queries} queries, k {K}; {a.rounds} rounds, "
              f"systems rotating; QPS at concurrency {CONCURRENCY} (median of rounds)",
              ["system", "recall@10:.4f", "p50 ms:.2f", "p95 ms:.2f", "QPS at 8:.0f", "load s:.1f", "memory MiB",
               "memory / Chroma's:.2f", "QPS / Chroma's:.2f"], rows)
