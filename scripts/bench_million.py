"""A million 384-d vectors on this machine, float32 against float16, straight in PostgreSQL.

Step-wise and resumable: each step records its figures in DIR/state.json and is skipped
when done (`--redo STEP` runs one again). The embedded PostgreSQL of Lakehouse (its
settings; `--pg-setting NAME=VALUE` to try others) holds two tables of the same vectors,
`m_float32 (id bigint, embedding vector(384))` and `m_float16 (... halfvec(384))` (vectord's
items tables also hold text, metadata and lexical postings: scripts/bench_chroma.py
measures those at 100k), each with an HNSW index as vectord builds one (m 16,
ef_construction 64, maintenance_work_mem 1GB, 2 parallel workers).

    data        1,000,000 + 1,000 points (scripts/bench_data.py, seed 42), the exact top 10
    load-P      COPY (binary) of the million rows into m_P
    index-P     the HNSW build; pgvector's notice when the graph outgrows maintenance_work_mem
    measure     for each precision in turn, twice (alternating): PostgreSQL stopped, the page
                cache of its files dropped (posix_fadvise DONTNEED on every file of the data
                directory after fsync; fincore checks), started again; the first 100 queries
                one at a time (cold), then 1,000 for recall@10 and p50/p95, 2,000 at
                concurrency 8 (QPS), PSS of PostgreSQL's processes and the page cache held
    warmup      the same cold start, then each way of warming the index before the first
                100 queries (none; reading the relation files into the page cache; warm
                queries), how long it took and the p95 after it
    recall      recall@10 of each at several ef_search (no timing: may run beside other work)
    grid        HNSW build parameters (--grid M:EFC,...) on m_float16: for each, the build's
                time and size and recall@10 by ef_search (each pair saved as it is done, so
                an interrupted grid resumes at the next pair; the last index is left built)
    report      every figure, and how long each step took

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_million.py [--dir var/bench-million] [STEP ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector, register_vector_async

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench_memory as mem  # noqa: E402
from bench_data import exact_top, mixture, pct  # noqa: E402

from internal.pg import embedded  # noqa: E402

PRECISIONS = ("float32", "float16")
TYPES = {"float32": ("vector", ">f4"), "float16": ("halfvec", ">f2")}
DIM, K, EF_SEARCH = 384, 10, 100
COLD_QUERIES = 100
STEPS = ("data", "load-float32", "load-float16", "index-float32", "index-float16", "recall",
         "grid", "measure", "warmup", "report")
SWEEP = (40, 64, 100, 128, 200, 400, 800)


def copy_vectors(conn: psycopg.Connection[Any], table: str, data: np.ndarray[Any, Any],
                 precision: str) -> None:
    """COPY (binary) rows (id = row number, embedding) into table: the rows laid out by
    numpy in PostgreSQL's binary COPY format (vector / halfvec: int16 dim, int16 0, the
    values big-endian), without a Python object per value."""
    dim = data.shape[1]
    _, fmt = TYPES[precision]
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"),
                    ("dim", ">i2"), ("unused", ">i2"), ("v", fmt, (dim,))])
    with conn.cursor().copy(f"COPY {table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        for start in range(0, len(data), 20000):
            block = np.asarray(data[start:start + 20000])
            rows = np.zeros(len(block), dtype=row)
            rows["nf"], rows["l1"], rows["l2"] = 2, 8, 4 + dim * np.dtype(fmt).itemsize
            rows["id"] = np.arange(start, start + len(block))
            rows["dim"], rows["v"] = dim, block
            cp.write(rows.tobytes())
        cp.write(struct.pack(">h", -1))


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.dir = Path(args.dir).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args = args
        self.state_file = self.dir / "state.json"
        self.state: dict[str, Any] = (json.loads(self.state_file.read_text())
                                      if self.state_file.exists() else {})
        self.settings = dict(s.split("=", 1) for s in args.pg_setting)
        self.pg: embedded.EmbeddedPostgres | None = None

    def save(self, step: str, figures: dict[str, Any], seconds: float) -> None:
        self.state[step] = {**figures, "step_seconds": round(seconds, 1),
                            "at": time.strftime("%Y-%m-%d %H:%M:%S")}
        self.state_file.write_text(json.dumps(self.state, indent=1))

    # PostgreSQL ------------------------------------------------------------------
    @property
    def pgdir(self) -> Path:
        return self.dir / "pg"

    def start(self) -> str:
        if self.pg is None:
            self.pg = embedded.start(self.pgdir, settings=self.settings)
        return self.pg.dsn

    def stop(self) -> None:
        if self.pg is not None:
            self.pg.stop()
            self.pg = None

    def cold_start(self) -> tuple[str, int]:
        """PostgreSQL stopped, its files dropped from the page cache, started again; the
        DSN and the bytes of its files still cached after the drop (fincore)."""
        self.stop()
        for f in self.pgdir.rglob("*"):
            if f.is_file() and not f.is_symlink():
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        left = mem.page_cache([self.pgdir])
        return self.start(), left

    # data ------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        pts = mixture(self.args.n + 1000, DIM, 1000, 42)
        np.save(self.dir / "queries.npy", pts[:1000])
        np.save(self.dir / "data.npy", pts[1000:])
        np.save(self.dir / "truth.npy", exact_top(pts[1000:], pts[:1000], K, block=50))
        return {"n": self.args.n}

    def load(self, precision: str) -> dict[str, Any]:
        kind, _ = TYPES[precision]
        data = np.load(self.dir / "data.npy", mmap_mode="r")
        with psycopg.connect(self.start(), autocommit=True) as conn:
            t = f"m_{precision}"
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, embedding {kind}({DIM}) NOT NULL)")
            conn.execute(f"ALTER TABLE {t} ALTER COLUMN embedding SET STORAGE MAIN")
            started = time.perf_counter()
            copy_vectors(conn, t, data, precision)
            load_s = time.perf_counter() - started
            conn.execute(f"VACUUM ANALYZE {t}")
            return {"load_s": round(load_s, 1), "rows": len(data),
                    "heap_bytes": conn.execute(f"SELECT pg_table_size('{t}')").fetchone()[0]}  # type: ignore[index]

    def index(self, precision: str) -> dict[str, Any]:
        kind, _ = TYPES[precision]
        t = f"m_{precision}"
        notices: list[str] = []
        with psycopg.connect(self.start(), autocommit=True) as conn:
            conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
            conn.execute(f"DROP INDEX IF EXISTS {t}_hnsw")
            notices.clear()
            conn.execute(f"SET maintenance_work_mem = '{self.args.mwm}'")
            conn.execute("SET max_parallel_maintenance_workers = 2")
            started = time.perf_counter()
            conn.execute(f"CREATE INDEX {t}_hnsw ON {t} USING hnsw (embedding {kind}_cosine_ops) "
                         f"WITH (m = {self.args.m}, ef_construction = {self.args.efc})")
            build_s = time.perf_counter() - started
            size = conn.execute(f"SELECT pg_relation_size('{t}_hnsw')").fetchone()[0]  # type: ignore[index]
        return {"build_s": round(build_s, 1), "index_bytes": size, "notices": notices,
                "maintenance_work_mem": self.args.mwm, "m": self.args.m, "efc": self.args.efc}

    def grid(self) -> dict[str, Any]:
        """Each (m, ef_construction) of --grid built on m_float16 in turn: build seconds,
        index bytes, recall@10 by ef_search against the exact float32 top 10."""
        done: dict[str, Any] = dict(self.state.get("grid-partial", {}))
        qs, truth = self.queries()
        for pair in self.args.grid.split(","):
            if pair in done:
                print(f"  {pair}: done, skipped", flush=True)
                continue
            m, efc = (int(x) for x in pair.split(":"))
            self.args.m, self.args.efc = m, efc
            built = self.index("float16")
            rec: dict[str, float] = {}
            with psycopg.connect(self.start(), autocommit=True) as conn:
                register_vector(conn)
                for ef in SWEEP:
                    conn.execute(f"SET hnsw.ef_search = {ef}")
                    found = [{int(r[0]) for r in conn.execute(self.sql("float16"), (q,),
                                                              prepare=True)} for q in qs]
                    hits = sum(len(f & {int(j) for j in truth[i]}) for i, f in enumerate(found))
                    rec[str(ef)] = hits / (len(qs) * K)
            done[pair] = {**built, "recall": rec}
            print(f"  {pair}: {done[pair]}", flush=True)
            self.state["grid-partial"] = done
            self.state_file.write_text(json.dumps(self.state, indent=1))
        return done

    # searches --------------------------------------------------------------------
    def queries(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        return np.load(self.dir / "queries.npy"), np.load(self.dir / "truth.npy")

    @staticmethod
    def sql(precision: str) -> str:
        return f"SELECT id FROM m_{precision} ORDER BY embedding <=> %s LIMIT {K}"

    def one_at_a_time(self, dsn: str, precision: str, qs: np.ndarray[Any, Any]
                      ) -> tuple[list[float], list[list[int]]]:
        ms, ids = [], []
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
            stmt = self.sql(precision)
            for q in qs:
                t = time.perf_counter()
                ids.append([int(r[0]) for r in conn.execute(stmt, (q,), prepare=True).fetchall()])
                ms.append((time.perf_counter() - t) * 1000)
        return ms, ids

    async def qps(self, dsn: str, precision: str, qs: np.ndarray[Any, Any], total: int) -> float:
        counter = iter(range(total))

        async def worker() -> None:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await register_vector_async(conn)
                await conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
                for i in counter:
                    await (await conn.execute(self.sql(precision), (qs[i % len(qs)],),
                                              prepare=True)).fetchall()

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(8)))
        return total / (time.perf_counter() - t)

    def measure_one(self, precision: str) -> dict[str, Any]:
        qs, truth = self.queries()
        dsn, left = self.cold_start()
        cold, _ = self.one_at_a_time(dsn, precision, qs[:COLD_QUERIES])
        self.one_at_a_time(dsn, precision, qs)  # every query once: the index warm
        ms, ids = self.one_at_a_time(dsn, precision, qs)
        hits = sum(len(set(ids[i]) & {int(j) for j in truth[i]}) for i in range(len(qs)))
        qps = asyncio.run(self.qps(dsn, precision, qs, 2000))
        pg = mem.postgres_memory(self.pgdir)
        cached = mem.page_cache(self.files(dsn, precision))
        return {"cold_first_ms": round(cold[0], 1), "cold_p50": round(pct(cold, 50), 2),
                "cold_p95": round(pct(cold, 95), 2), "cold_max": round(max(cold), 1),
                "cache_left_after_drop_mib": round(left / mem.MIB, 1),
                "recall": hits / (len(qs) * K), "p50": round(pct(ms, 50), 2),
                "p95": round(pct(ms, 95), 2), "qps8": round(qps), "pg_pss_mib": round(pg.all.pss / mem.MIB),
                "pg_shmem_mib": round(pg.all.shmem / mem.MIB),
                "pg_held_mib": round(pg.held / mem.MIB),
                "pg_shared_resident_mib": round(pg.shared_resident / mem.MIB),
                "table_page_cache_mib": round(cached / mem.MIB)}

    def recall(self) -> dict[str, Any]:
        """recall@10 against the exact float32 top 10, at each ef_search; and float16's
        against the exact top 10 of the float16-rounded vectors (what its index holds:
        the rest of its misses are near-ties that rounding reorders, not the graph's)."""
        qs, truth = self.queries()
        data = np.load(self.dir / "data.npy", mmap_mode="r")
        truths = {"": truth, " (against the float16-rounded top 10)": exact_top(
            np.asarray(data, dtype=np.float16).astype(np.float32),
            qs.astype(np.float16).astype(np.float32), K, block=50)}
        out: dict[str, Any] = {}
        with psycopg.connect(self.start(), autocommit=True) as conn:
            register_vector(conn)
            for p in PRECISIONS:
                for ef in SWEEP:
                    conn.execute(f"SET hnsw.ef_search = {ef}")
                    found = [{int(r[0]) for r in conn.execute(self.sql(p), (q,), prepare=True)}
                             for q in qs]
                    for label, t in truths.items():
                        if label and p == "float32":
                            continue
                        hits = sum(len(f & {int(j) for j in t[i]}) for i, f in enumerate(found))
                        out[f"{p} ef_search {ef}{label}"] = hits / (len(qs) * K)
        return out

    def measure(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rnd in range(2):
            for p in (PRECISIONS if rnd == 0 else PRECISIONS[::-1]):
                got = self.measure_one(p)
                print(f"  round {rnd + 1} {p}: {got}", flush=True)
                out.setdefault(p, []).append(got)
        with psycopg.connect(self.start(), autocommit=True) as conn:
            out["settings"] = {n: conn.execute(f"SHOW {n}").fetchone()[0]  # type: ignore[index]
                               for n in ("shared_buffers", "max_connections")}
        out["disk_mib"] = round(mem.disk(self.pgdir) / mem.MIB)
        return out

    def files(self, dsn: str, precision: str) -> list[Path]:
        """The segment files of the index and the table (1 GB each), index first."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            rels = [self.pgdir / str(conn.execute(f"SELECT pg_relation_filepath('{r}')").fetchone()[0])  # type: ignore[index]
                    for r in (f"m_{precision}_hnsw", f"m_{precision}")]
        out = []
        for rel in rels:
            more = [p for p in rel.parent.glob(rel.name + ".*") if p.suffix[1:].isdigit()]
            out += [rel, *sorted(more, key=lambda p: int(p.suffix[1:]))]
        return out

    def warm_read(self, dsn: str, precision: str) -> None:
        """Every block of the index and the table read once, into the page cache."""
        for seg in self.files(dsn, precision):
            with open(seg, "rb") as f:
                while f.read(16 * 2**20):
                    pass

    def warmup(self) -> dict[str, Any]:
        qs, _ = self.queries()
        # Warm queries the service could make itself: stored vectors picked at random
        # (independent of the test queries' clusters).
        data = np.load(self.dir / "data.npy", mmap_mode="r")
        pick = np.random.default_rng(7).choice(len(data), self.args.warm_queries, replace=False)
        warm_qs = np.asarray(data[np.sort(pick)])
        out: dict[str, Any] = {}
        methods = ("none", "read files", "warm queries")
        for p in PRECISIONS[::-1]:
            for method in methods:
                dsn, _ = self.cold_start()
                started = time.perf_counter()
                if method == "read files":
                    self.warm_read(dsn, p)
                elif method == "warm queries":
                    self.one_at_a_time(dsn, p, warm_qs)
                warm_s = time.perf_counter() - started
                ms, _ = self.one_at_a_time(dsn, p, qs[:COLD_QUERIES])
                got = {"warm_s": round(warm_s, 1), "first_ms": round(ms[0], 1),
                       "p50": round(pct(ms, 50), 2), "p95": round(pct(ms, 95), 2)}
                print(f"  {p} {method}: {got}", flush=True)
                out[f"{p} / {method}"] = got
        return out

    def report(self) -> dict[str, Any]:
        st, mib = self.state, mem.MIB
        rows: list[tuple[str, Any]] = []

        def both(key: str, fmt: str = "{}") -> str:
            return " / ".join(fmt.format(r[key]) for r in runs)

        print(f"\n{self.args.n:,} x {DIM} (Gaussian mixture, seed 42), 1,000 queries, k {K}, "
              f"ef_search {EF_SEARCH}; PostgreSQL {st.get('measure', {}).get('settings')}\n")
        print("| | " + " | ".join(PRECISIONS) + " |\n|---|" + "---:|" * len(PRECISIONS))
        for p in PRECISIONS:
            load, index = st.get(f"load-{p}", {}), st.get(f"index-{p}", {})
            runs = st.get("measure", {}).get(p, [])
            rows += [
                ("load, COPY binary (s)", load.get("load_s")),
                ("table MiB", round(load.get("heap_bytes", 0) / mib)),
                (f"HNSW build (s), maintenance_work_mem {index.get('maintenance_work_mem')}",
                 index.get("build_s")),
                ("HNSW index MiB", round(index.get("index_bytes", 0) / mib)),
                ("recall@10", both("recall", "{:.4f}") if runs else None),
                ("p50 / p95 ms, warm (each round)",
                 " ; ".join(f"{r['p50']} / {r['p95']}" for r in runs)),
                ("QPS at concurrency 8 (each round)", both("qps8")),
                ("cold: first query ms (each round)", both("cold_first_ms")),
                ("cold: p50 / p95 / max of the first 100 (each round)",
                 " ; ".join(f"{r['cold_p50']} / {r['cold_p95']} / {r['cold_max']}" for r in runs)),
                ("PostgreSQL PSS MiB after the round (its shared-memory part)",
                 " ; ".join(f"{r['pg_pss_mib']} ({r['pg_shmem_mib']})" for r in runs)),
                ("PostgreSQL held MiB: processes' own + shared memory resident",
                 " ; ".join(f"{r.get('pg_held_mib')} ({r.get('pg_shared_resident_mib')})"
                            for r in runs)),
                ("page cache held by the table + index, MiB", both("table_page_cache_mib")),
            ]
        half = len(rows) // len(PRECISIONS)
        for i in range(half):
            print(f"| {rows[i][0]} | " + " | ".join(str(rows[i + j * half][1])
                                                   for j in range(len(PRECISIONS))) + " |")
        print(f"\ndata directory on disk: {st.get('measure', {}).get('disk_mib')} MiB (both tables); "
              "cold = PostgreSQL restarted with its files dropped from the page cache")
        for p in PRECISIONS:
            notes = st.get(f"index-{p}", {}).get("notices")
            if notes:
                print(f"{p} build: {'; '.join(notes)}")
        if "recall" in st:
            print("\nrecall@10 by ef_search: " + ", ".join(
                f"{k} {v:.4f}" for k, v in st["recall"].items() if "ef_search" in k))
        if "warmup" in st:
            print("\n| precision / warm-up | warm-up s | first query ms | p50 ms | p95 ms (first 100) |")
            print("|---|---:|---:|---:|---:|")
            for name, r in st["warmup"].items():
                if isinstance(r, dict):
                    print(f"| {name} | {r['warm_s']} | {r['first_ms']} | {r['p50']} | {r['p95']} |")
        grid = st.get("grid") or st.get("grid-partial")
        if grid:
            print(f"\nHNSW build parameters on m_float16 (maintenance_work_mem "
                  f"{next(iter(grid.values()))['maintenance_work_mem']}, 2 workers): recall@10 "
                  "by ef_search against the exact float32 top 10")
            print("| m | ef_construction | build s | index MiB | " + " | ".join(
                f"ef {ef}" for ef in SWEEP) + " |")
            print("|---:|---:|---:|---:|" + "---:|" * len(SWEEP))
            for g in grid.values():
                print(f"| {g['m']} | {g['efc']} | {g['build_s']} | {g['index_bytes'] / mib:.0f} | "
                      + " | ".join(f"{g['recall'][str(ef)]:.4f}" for ef in SWEEP) + " |")
        print("\n| step | seconds | when |\n|---|---:|---|")
        for step in STEPS:
            if step in st:
                print(f"| {step} | {st[step]['step_seconds']} | {st[step]['at']} |")
        return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", metavar="STEP", help=", ".join(STEPS))
    parser.add_argument("--dir", default=str(ROOT / "var" / "bench-million"))
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--mwm", default="1GB", help="maintenance_work_mem of the HNSW builds")
    parser.add_argument("--m", type=int, default=16, help="HNSW m of the index steps")
    parser.add_argument("--efc", type=int, default=64, help="HNSW ef_construction of the index steps")
    parser.add_argument("--grid", default="16:64,16:128,24:128,32:128",
                        help="the grid step's (m:ef_construction) pairs")
    parser.add_argument("--warm-queries", type=int, default=500)
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--redo", action="append", default=[], choices=STEPS)
    args = parser.parse_args()
    todo = args.steps or list(STEPS)
    if any(s not in STEPS for s in todo):
        raise SystemExit(f"steps: expected some of {', '.join(STEPS)}")
    bench = Bench(args)
    try:
        for step in todo:
            if step in bench.state and step not in args.redo and step != "report":
                print(f"{step}: done ({bench.state[step]['step_seconds']} s), skipped")
                continue
            print(f"{step}: running", flush=True)
            started = time.perf_counter()
            name, _, precision = step.partition("-")
            fn = getattr(bench, name)
            figures = fn(precision) if precision else fn()
            if step != "report":
                bench.save(step, figures, time.perf_counter() - started)
                print(f"{step}: {time.perf_counter() - started:.1f} s {figures}", flush=True)
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
