"""Recall against QPS at each ef_search: Lakehouse's vectord, Chroma's server and Qdrant's
engine on the same vectors.

A Gaussian mixture (--n x 384, 1,000 centres, seed 42; --queries held out) loaded into
each: vectord over HTTP with its embedded PostgreSQL (the corpus as shipped: float16, HNSW
m 16 / ef_construction 64, built after the load), Chroma's server (bench/peers/chroma.py,
its defaults but the cosine space) and Qdrant Edge in-process (bench/peers/qdrant.py, m 16
/ ef_construct 64). For each ef of --efs, the systems in turn (the order rotated): recall@10
against exact search (the queries one at a time) and QPS at concurrency 8 (vectord and
Chroma over HTTP from one aiohttp client; Qdrant from 8 threads, in this process, no HTTP:
its QPS is an engine's, the others' a server's). --no-chroma leaves Chroma out.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import numpy as np
import psycopg

from bench.data.vectors import exact_top, item_id, mixture, recall
from bench.harness import Run
from bench.harness.http import CORPORA, post, session
from bench.harness.pg import corpus_id
from bench.harness.stacks import daemon
from bench.harness.timing import qps, rotated
from bench.peers.chroma import Chroma
from bench.peers.qdrant import Qdrant
from internal.pg import embedded

OPTIONS = {"n": 100_000, "queries": 1000, "efs": "10,16,24,32,48,64,100,128,200",
           "no_chroma": (False, "leave Chroma out (no chromadb environment needed)")}
QUICK = {"n": 20_000, "queries": 200, "efs": "16,40,100"}
K, CORPUS = 10, "bench_peers"


async def main(run: Run) -> None:
    a = run.args
    efs = [int(x) for x in a.efs.split(",")]
    pts = mixture(a.n + a.queries, 384, 1000, 42)
    queries, data = pts[:a.queries], pts[a.queries:]
    truth = exact_top(data, queries, K)
    np.save(run.folder / "data.npy", data)
    pg = embedded.start(run.folder / "pg")
    chroma = None if a.no_chroma else Chroma(run.folder / "chroma")
    qdrant = Qdrant(run.folder / "qdrant", data)
    rows: list[tuple[Any, ...]] = []
    sessions: list[aiohttp.ClientSession] = []
    try:
        with daemon("vectord", {"LAKEHOUSE_PG_DSN": pg.dsn}, path="/readyz") as vd:
            async with session(8) as http:
                c = f"{vd.base}{CORPORA}"
                await post(http, c, {"name": CORPUS, "dim": 384, "metric": "cosine", "language": "english",
                                     "model": "bench", "defer_index": True})
                t = time.perf_counter()
                for s in range(0, len(data), 1000):
                    await post(http, f"{c}/{CORPUS}/items", {"model": "bench", "items": [
                        {"id": item_id(s + i), "vector": v.tolist(), "text": f"point {s + i}"}
                        for i, v in enumerate(data[s:s + 1000])]})
                await post(http, f"{c}/{CORPUS}/index", {})
                loads = {"lakehouse": time.perf_counter() - t, "qdrant": qdrant.load_s}
                with psycopg.connect(pg.dsn, autocommit=True) as conn:
                    conn.execute(f"VACUUM ANALYZE vectord_items_{corpus_id(pg.dsn, CORPUS)}")
                if chroma is not None:
                    loads["chroma"] = float(chroma.load(run.folder / "data.npy")["seconds"])
                run.say("load s (HNSW built): " + ", ".join(f"{k} {v:.1f}" for k, v in loads.items()))
                qlists = [v.tolist() for v in queries]

                def lakehouse(ef: int) -> Any:
                    async def one(i: int) -> list[str]:
                        out = await post(http, f"{c}/{CORPUS}/search", {"mode": "vector", "k": K,
                                                                         "query_vector": qlists[i], "ef_search": ef})
                        return [h["id"] for h in out["hits"]]
                    return one

                def chroma_at(ef: int) -> Any:
                    assert chroma is not None
                    chroma.ef(ef)  # a restart: the connections to the server before it are gone
                    fresh = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16))
                    sessions.append(fresh)

                    async def one(i: int) -> list[str]:
                        return list((await post(fresh, chroma.url, chroma.body(qlists[i], K)))["ids"][0])
                    return one

                systems = ["lakehouse", "qdrant"] + ([] if chroma is None else ["chroma"])
                for r, ef in enumerate(efs):
                    for name in rotated(systems, r):
                        if name == "qdrant":
                            found = [qdrant.search(v, K, ef) for v in queries]
                            got = (recall(found, truth, name=int), qdrant.qps(queries, K, ef))
                        else:
                            fn = lakehouse(ef) if name == "lakehouse" else chroma_at(ef)
                            await qps(fn, range(min(100, a.queries)), 8)  # warm
                            found = [await fn(i) for i in range(a.queries)]
                            got = (recall(found, truth), await qps(fn, range(a.queries), 8))
                        rows.append((name, ef, *got))
                        run.progress(f"{name} ef {ef}: recall {got[0]:.4f}, {got[1]:.0f} QPS")
    finally:
        for s in sessions:
            await s.close()
        qdrant.close()
        if chroma is not None:
            chroma.stop()
        pg.stop()
    run.table(f"{a.n:,} x 384 (Gaussian mixture, seed 42), {a.queries} queries, k {K}; recall@10 one at a "
              "time, QPS at concurrency 8", ["system", "ef_search:d", "recall@10:.4f", "QPS:.0f"], rows)
    for name in {r[0] for r in rows}:
        run.series(f"recall/QPS {name}", [[r[2], r[3], r[1]] for r in rows if r[0] == name])
