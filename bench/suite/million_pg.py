"""A million 384-d vectors on this machine, float32 against float16, straight in PostgreSQL (no daemon).

Step-wise and resumable: each step keeps its figures in --dir/state.json and is skipped when
done (--redo STEP runs one again; --steps names the steps to run). The embedded PostgreSQL
(its settings; --pg-setting NAME=VALUE to try others) holds two tables of the same vectors,
m_float32 (vector(384)) and m_float16 (halfvec(384)), each with an HNSW index as vectord
builds one (m 16, ef_construction 64, maintenance_work_mem 1GB, 2 workers).
  data      1,000,000 + 1,000 points (seed 42) and the exact top 10
  load-P    COPY (binary) of the rows into m_P;  index-P  the HNSW build
  measure   each precision in turn, twice: PostgreSQL restarted with its files dropped
            from the page cache; the first 100 queries one at a time (cold), then the
            1,000 for recall@10 and p50/p95, 2,000 at concurrency 8 (QPS), memory
  recall    recall@10 of each at several ef_search (no timing)
  grid      HNSW build parameters (--grid M:EFC,...) on m_float16: build time, size,
            recall@10 by ef_search
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector, register_vector_async

from bench.data.vectors import exact_top, mixture
from bench.harness import Run
from bench.harness import memory as mem
from bench.harness.pg import copy_vectors, hnsw, vector_table
from bench.harness.timing import pct
from internal.pg import embedded

OPTIONS = {"dir": ("var/bench-million", "where the data, the database and state.json stay"),
           "n": 1_000_000, "mwm": "1GB", "m": 16, "efc": 64, "grid": "16:64,16:128,24:128,32:128",
           "steps": ("data,load-float32,load-float16,index-float32,index-float16,recall,measure", "steps to run"),
           "redo": ([], "a step to run again (repeatable)"), "pg_setting": ([], "NAME=VALUE (repeatable)")}
QUICK = {"dir": "var/bench-million-quick", "n": 20_000}
PRECISIONS, DIM, K, EF = ("float32", "float16"), 384, 10, 100
SWEEP = (40, 64, 100, 128, 200, 400, 800)


class Million:
    def __init__(self, run: Run) -> None:
        self.run, self.a = run, run.args
        self.dir = (run.root / self.a.dir) if not Path(self.a.dir).is_absolute() else Path(self.a.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_file = self.dir / "state.json"
        self.state: dict[str, Any] = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        self.settings = dict(s.split("=", 1) for s in self.a.pg_setting)
        self.pg: embedded.EmbeddedPostgres | None = None

    def dsn(self) -> str:
        if self.pg is None:
            self.pg = embedded.start(self.dir / "pg", settings=self.settings)
        return self.pg.dsn

    def stop(self) -> None:
        if self.pg is not None:
            self.pg.stop()
            self.pg = None

    def cold(self) -> tuple[str, int]:
        """PostgreSQL stopped, its files dropped from the page cache, started again; the DSN
        and the bytes of its files still cached after the drop."""
        self.stop()
        left = mem.drop_page_cache(self.dir / "pg")
        return self.dsn(), left

    def data(self) -> dict[str, Any]:
        pts = mixture(self.a.n + 1000, DIM, 1000, 42)
        np.save(self.dir / "queries.npy", pts[:1000])
        np.save(self.dir / "data.npy", pts[1000:])
        np.save(self.dir / "truth.npy", exact_top(pts[1000:], pts[:1000], K, block=50))
        return {"n": self.a.n}

    def load(self, p: str) -> dict[str, Any]:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            vector_table(conn, f"m_{p}", p, DIM)
            t = time.perf_counter()
            copy_vectors(conn, f"m_{p}", np.load(self.dir / "data.npy", mmap_mode="r"), p)
            load_s = time.perf_counter() - t
            conn.execute(f"VACUUM ANALYZE m_{p}")
            return {"load_s": round(load_s, 1),
                    "heap_bytes": conn.execute(f"SELECT pg_table_size('m_{p}')").fetchone()[0]}  # type: ignore[index]

    def index(self, p: str, m: int = 0, efc: int = 0) -> dict[str, Any]:
        notices: list[str] = []
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
            conn.execute(f"DROP INDEX IF EXISTS m_{p}_hnsw")
            t = time.perf_counter()
            hnsw(conn, f"m_{p}", f"m_{p}_hnsw", f"embedding {'halfvec' if p == 'float16' else 'vector'}_cosine_ops",
                 m or self.a.m, efc or self.a.efc, self.a.mwm)
            build_s = time.perf_counter() - t
            size = conn.execute(f"SELECT pg_relation_size('m_{p}_hnsw')").fetchone()[0]  # type: ignore[index]
        return {"build_s": round(build_s, 1), "index_bytes": size, "notices": notices,
                "m": m or self.a.m, "efc": efc or self.a.efc}

    def found(self, conn: psycopg.Connection[Any], p: str, qs: np.ndarray, ef: int) -> list[list[int]]:
        conn.execute(f"SET hnsw.ef_search = {ef}")
        stmt = f"SELECT id FROM m_{p} ORDER BY embedding <=> %s LIMIT {K}"
        return [[int(r[0]) for r in conn.execute(stmt, (q,), prepare=True)] for q in qs]

    def recall_of(self, found: list[list[int]], truth: np.ndarray) -> float:
        return sum(len(set(f) & {int(j) for j in truth[i]}) for i, f in enumerate(found)) / (len(found) * K)

    def recall(self) -> dict[str, Any]:
        qs, truth = np.load(self.dir / "queries.npy"), np.load(self.dir / "truth.npy")
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            register_vector(conn)
            return {f"{p} ef_search {ef}": self.recall_of(self.found(conn, p, qs, ef), truth)
                    for p in PRECISIONS for ef in SWEEP}

    def grid(self) -> dict[str, Any]:
        qs, truth = np.load(self.dir / "queries.npy"), np.load(self.dir / "truth.npy")
        out = {}
        for pair in self.a.grid.split(","):
            m, efc = (int(x) for x in pair.split(":"))
            out[pair] = self.index("float16", m, efc)
            with psycopg.connect(self.dsn(), autocommit=True) as conn:
                register_vector(conn)
                out[pair]["recall"] = {ef: self.recall_of(self.found(conn, "float16", qs, ef), truth) for ef in SWEEP}
        return out

    def measure_one(self, p: str) -> dict[str, Any]:
        qs, truth = np.load(self.dir / "queries.npy"), np.load(self.dir / "truth.npy")
        dsn, left = self.cold()
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            conn.execute(f"SET hnsw.ef_search = {EF}")
            stmt = f"SELECT id FROM m_{p} ORDER BY embedding <=> %s LIMIT {K}"

            def timed(batch: np.ndarray) -> tuple[list[float], list[list[int]]]:
                ms, ids = [], []
                for q in batch:
                    t = time.perf_counter()
                    ids.append([int(r[0]) for r in conn.execute(stmt, (q,), prepare=True)])
                    ms.append((time.perf_counter() - t) * 1000)
                return ms, ids
            cold, _ = timed(qs[:100])
            timed(qs)  # every query once: the index warm
            ms, ids = timed(qs)

        async def rate() -> float:
            counter = iter(range(2000))

            async def worker() -> None:
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                    await register_vector_async(c)
                    await c.execute(f"SET hnsw.ef_search = {EF}")
                    for i in counter:
                        await (await c.execute(stmt, (qs[i % len(qs)],), prepare=True)).fetchall()
            t = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(8)))
            return 2000 / (time.perf_counter() - t)
        qps = asyncio.run(rate())
        pg = mem.postgres_memory(self.dir / "pg")
        return {"recall": self.recall_of(ids, truth), "p50": pct(ms, 50), "p95": pct(ms, 95), "qps8": qps,
                "cold_first_ms": cold[0], "cold_p95": pct(cold, 95), "cache_left_mib": left / mem.MIB,
                "pg_held_mib": pg.held / mem.MIB}

    def measure(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rnd in range(2):
            for p in (PRECISIONS if rnd == 0 else PRECISIONS[::-1]):
                out.setdefault(p, []).append(self.measure_one(p))
        return out


def main(run: Run) -> None:
    b = Million(run)
    try:
        for step in [s for s in run.args.steps.split(",") if s]:
            if step in b.state and step not in run.args.redo:
                run.progress(f"{step}: done, skipped")
                continue
            t = time.perf_counter()
            name, _, precision = step.partition("-")
            figures = getattr(b, name)(precision) if precision else getattr(b, name)()
            b.state[step] = {**figures, "step_seconds": round(time.perf_counter() - t, 1)}
            b.state_file.write_text(json.dumps(b.state, indent=1))
    finally:
        b.stop()
    st = b.state
    rows = []
    for p in PRECISIONS:
        load, index, runs = st.get(f"load-{p}", {}), st.get(f"index-{p}", {}), st.get("measure", {}).get(p, [])
        rows.append((p, load.get("load_s"), load.get("heap_bytes", 0) / mem.MIB, index.get("build_s"),
                     index.get("index_bytes", 0) / mem.MIB, *(
                         " ; ".join(f"{r[k]:.{d}f}" for r in runs) for k, d in
                         (("recall", 4), ("p50", 2), ("p95", 2), ("qps8", 0), ("cold_first_ms", 1), ("pg_held_mib", 0)))))
    run.table(f"{run.args.n:,} x {DIM} (Gaussian mixture, seed 42), 1,000 queries, k {K}, ef_search {EF}",
              ["precision", "load s:.1f", "table MiB:.0f", "HNSW build s:.1f", "HNSW MiB:.0f", "recall@10 (rounds)",
               "p50 ms", "p95 ms", "QPS at 8", "cold first query ms", "PostgreSQL held MiB"], rows)
    if "recall" in st:
        run.table("recall@10 by ef_search", ["precision", *(f"ef {ef}:.4f" for ef in SWEEP)],
                  [(p, *(st["recall"].get(f"{p} ef_search {ef}") for ef in SWEEP)) for p in PRECISIONS])
    if "grid" in st:
        run.table("HNSW build parameters on m_float16: recall@10 by ef_search",
                  ["m:d", "ef_construction:d", "build s:.1f", "index MiB:.0f", *(f"ef {ef}:.4f" for ef in SWEEP)],
                  [(g["m"], g["efc"], g["build_s"], g["index_bytes"] / mem.MIB,
                    *(g["recall"].get(str(ef), g["recall"].get(ef)) for ef in SWEEP)) for g in st["grid"].values()])
