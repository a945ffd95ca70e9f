"""Lakehouse's vectord against the Chroma server, 100k x 384, in one run.

The same Gaussian mixture (scripts/bench_data.py: 1,000 centres, seed 42, L2-normalised),
1,000 queries, k 10. Lakehouse: an embedded PostgreSQL and vectord over HTTP, each
profile of PROFILES in its own data directory (its HNSW index deferred during the load,
then built). Chroma: `chroma run` from the `chromadb` package in its own virtual
environment (--chroma-venv; made with `python3 -m venv DIR && DIR/bin/pip install
chromadb==1.5.9` when missing: a benchmark tool, never a Lakehouse dependency), loaded
through its client (scripts/bench_chroma_client.py), then its ef_search tuned: the
smallest of CHROMA_EF whose recall@10 reaches the first Lakehouse profile's (less
RECALL_SLACK). Then rounds, each system in turn (the order rotated each round): 1,000
queries one at a time (p50, p95) and 2,000 at concurrency 8 (QPS); Chroma both through
raw HTTP POSTs (the same aiohttp client as Lakehouse) and through its own client.
Memory after the rounds (scripts/bench_memory.py): vectord's PSS plus PostgreSQL's held
memory (its processes' own pages and its shared segment's resident pages, once), Chroma's
server's PSS, with where it goes; the page cache of each system's files on a line of its
own (in no process's memory).

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_chroma.py [--n 100000] [--queries 1000] [--rounds 3]
        [--lakehouse default,float32,before] [--chroma-venv var/bench-chroma]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench_memory as mem  # noqa: E402
import proto_precision  # noqa: E402
from bench_data import F32, exact_top, free_port, item_id, mixture, pct, qps, recall, terminate  # noqa: E402

from internal.pg import embedded  # noqa: E402

K = 10
CHROMA_VERSION = "1.5.9"
CHROMA_EF = (10, 16, 24, 32, 48, 64, 100, 128, 200)
RECALL_SLACK = 0.0005  # 5 of the 10,000 top-10 places of 1,000 queries
CONCURRENCY = 8
enc = msgspec.json.Encoder()
dec = msgspec.json.Decoder()
CORPUS = "bench_chroma"


@dataclass(frozen=True)
class Profile:
    """One way of running Lakehouse: the corpus's precision (None: vectord's default), the
    embedded PostgreSQL's settings over its defaults, and vectord's environment."""

    precision: str | None
    pg: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    note: str = ""


# The settings shipped before precisions (the prototype's profiles and figures are in
# DECISIONS.md, "Vectors: half precision"): float32, a 512 MB pool, vectord's pool 2..10
# (vectord's malloc thresholds are fixed in every profile: it sets them at start).
BEFORE_PG = {"shared_buffers": "512MB"}
BEFORE_ENV = {"LAKEHOUSE_VECTORD_POOL_MIN": "2", "LAKEHOUSE_VECTORD_POOL_MAX": "10"}

PROFILES = {
    "default": Profile(None, note="as shipped: float16"),
    "float32": Profile("float32", note='"precision": "float32" at creation, else as shipped'),
    "before": Profile("float32", pg=BEFORE_PG, env=BEFORE_ENV,
                      note="as shipped before: float32, shared_buffers 512MB, pool 2..10"),
}

Query = Callable[[int], Awaitable[list[str]]]


async def post(http: aiohttp.ClientSession, url: str, body: bytes) -> Any:
    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        out = dec.decode(await resp.read())
        if resp.status >= 400:
            raise SystemExit(f"{url}: {resp.status} {out}")
        return out


async def wait_for(http: aiohttp.ClientSession, url: str, proc: subprocess.Popen[bytes],
                   what: str) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            async with http.get(url) as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit(f"{what} not ready after 120 s")


class Lakehouse:
    """An embedded PostgreSQL and a vectord process, run as one profile says."""

    def __init__(self, name: str, profile: Profile, tmp: Path) -> None:
        self.name, self.profile, self.dir = name, profile, tmp / name
        self.pg = embedded.start(self.dir / "pg", settings=profile.pg)
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = {**os.environ, "LAKEHOUSE_PG_DSN": self.pg.dsn, "LAKEHOUSE_VECTORD_PORT": str(port),
               "LAKEHOUSE_LOG_LEVEL": "warning", "LAKEHOUSE_LOG_FORMAT": "json",
               "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"), **profile.env}
        self.proc = subprocess.Popen([sys.executable, "-m", "internal.vectord.server"], cwd=ROOT,
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.load_s = self.build_s = 0.0
        self.bodies: list[bytes] = []
        self.rss: dict[str, int] = {}

    async def load(self, http: aiohttp.ClientSession, data: F32) -> None:
        await wait_for(http, f"{self.base}/readyz", self.proc, f"vectord ({self.name})")
        self.rss["idle"] = mem.usage(self.proc.pid).rss
        c = f"{self.base}/v1/vectors/corpora"
        spec = {"name": CORPUS, "dim": data.shape[1], "metric": "cosine",
                "language": "english", "model": "bench", "defer_index": True}
        if self.profile.precision is not None:
            spec["precision"] = self.profile.precision
        await post(http, c, enc.encode(spec))
        sem = asyncio.Semaphore(2)  # two batches of 1,000 in flight, as bench_vectors

        async def batch(start: int) -> None:
            rows = data[start:start + 1000]
            body = enc.encode({"model": "bench", "items": [
                {"id": item_id(start + i), "vector": rows[i].tolist(), "text": f"point {start + i}"}
                for i in range(len(rows))]})
            async with sem:
                await post(http, f"{c}/{CORPUS}/items", body)

        t = time.perf_counter()
        await asyncio.gather(*(batch(s) for s in range(0, len(data), 1000)))
        self.load_s = time.perf_counter() - t
        self.rss["loaded"] = mem.usage(self.proc.pid).rss
        t = time.perf_counter()
        await post(http, f"{c}/{CORPUS}/index", b"{}")
        self.build_s = time.perf_counter() - t
        await asyncio.to_thread(self.analyze)

    def analyze(self) -> None:
        with psycopg.connect(self.pg.dsn, autocommit=True) as conn:
            cid, _, _ = proto_precision.corpus(conn, CORPUS)
            conn.execute(f"VACUUM ANALYZE vectord_items_{cid}")

    def prepare(self, queries: F32) -> None:
        self.bodies = [enc.encode({"mode": "vector", "query_vector": q.tolist(), "k": K})
                       for q in queries]

    def query(self, http: aiohttp.ClientSession) -> Query:
        url = f"{self.base}/v1/vectors/corpora/{CORPUS}/search"

        async def one(i: int) -> list[str]:
            out = await post(http, url, self.bodies[i % len(self.bodies)])
            return [h["id"] for h in out["hits"]]
        return one

    def memory(self) -> tuple[mem.Usage, mem.PgMemory]:
        return mem.usage(self.proc.pid), mem.postgres_memory(self.pg.data_dir)

    def stop(self) -> None:
        terminate(self.proc)
        self.pg.stop()


class Chroma:
    """`chroma run` from its own virtual environment."""

    def __init__(self, venv: Path, tmp: Path) -> None:
        self.venv, self.dir = venv, tmp / "chroma"
        self.port = free_port()
        self.proc = self.start()
        self.base = f"http://127.0.0.1:{self.port}/api/v2"
        self.url = ""
        self.load_s = 0.0
        self.bodies: list[bytes] = []
        self.rss: dict[str, int] = {}

    def start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(self.venv / "bin" / "chroma"), "run", "--path", str(self.dir), "--host",
             "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def restart(self, http: aiohttp.ClientSession) -> None:
        """A new ef_search reaches the index only when the server loads it again: Chroma
        1.5.9 keeps the loaded index with the ef_search it was loaded with."""
        self.stop()
        self.proc = self.start()
        await wait_for(http, f"{self.base}/heartbeat", self.proc, "chroma")

    def client(self, *args: str) -> Any:
        out = subprocess.run([str(self.venv / "bin" / "python"),
                              str(ROOT / "scripts" / "bench_chroma_client.py"), *args,
                              "--port", str(self.port)], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"chroma client {args[0]}: {out.stderr[-2000:]}")
        return json.loads(out.stdout)

    async def load(self, http: aiohttp.ClientSession, data_file: Path) -> dict[str, Any]:
        await wait_for(http, f"{self.base}/heartbeat", self.proc, "chroma")
        self.rss["idle"] = mem.usage(self.proc.pid).rss
        got = await asyncio.to_thread(self.client, "load", "--data", str(data_file))
        self.load_s = float(got["seconds"])
        self.url = (f"{self.base}/tenants/default_tenant/databases/default_database/"
                    f"collections/{got['id']}/query")
        self.rss["loaded"] = mem.usage(self.proc.pid).rss
        return dict(got)

    def prepare(self, queries: F32) -> None:
        self.bodies = [enc.encode({"query_embeddings": [q.tolist()], "n_results": K,
                                   "include": ["distances"]}) for q in queries]

    def query(self, http: aiohttp.ClientSession) -> Query:
        async def one(i: int) -> list[str]:
            out = await post(http, self.url, self.bodies[i % len(self.bodies)])
            return list(out["ids"][0])
        return one

    def stop(self) -> None:
        terminate(self.proc)


def chroma_venv(path: Path) -> Path:
    """The benchmark's own environment with chromadb (made on first use)."""
    path = path.resolve()
    if not (path / "bin" / "chroma").exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", f"chromadb=={CHROMA_VERSION}"],
                       check=True)
    return path


async def one_at_a_time(fn: Query, n: int) -> tuple[list[float], list[list[str]]]:
    ms, ids = [], []
    for i in range(n):
        t = time.perf_counter()
        ids.append(await fn(i))
        ms.append((time.perf_counter() - t) * 1000)
    return ms, ids


async def at_concurrency(fn: Query, total: int) -> float:
    return await qps(total, CONCURRENCY, fn)


@dataclass
class Timing:
    ms: list[float] = field(default_factory=list)
    qps: list[float] = field(default_factory=list)
    ids: list[list[str]] = field(default_factory=list)


async def tune_chroma(http: aiohttp.ClientSession, chroma: Chroma, n: int,
                      truth: np.ndarray[Any, Any], target: float) -> tuple[int, dict[int, float]]:
    """Chroma's recall@10 at each ef_search of CHROMA_EF; the smallest reaching target."""
    sweep: dict[int, float] = {}
    fn = chroma.query(http)
    for ef in CHROMA_EF:
        await asyncio.to_thread(chroma.client, "ef", "--ef", str(ef))
        await chroma.restart(http)
        _, ids = await one_at_a_time(fn, n)
        sweep[ef] = recall(ids, truth)
    chosen = next((ef for ef in CHROMA_EF if sweep[ef] >= target), CHROMA_EF[-1])
    await asyncio.to_thread(chroma.client, "ef", "--ef", str(chosen))
    await chroma.restart(http)
    return chosen, sweep


async def run(args: argparse.Namespace, tmp: Path) -> None:
    names = args.lakehouse.split(",")
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise SystemExit(f"--lakehouse: unknown profile(s) {unknown}; choose from {list(PROFILES)}")
    venv = await asyncio.to_thread(chroma_venv, Path(args.chroma_venv))
    points = mixture(args.n + args.queries, args.dim, 1000, 42)
    queries, data = points[:args.queries], points[args.queries:]
    truth = exact_top(data, queries, K)
    np.save(tmp / "data.npy", data)
    np.save(tmp / "queries.npy", queries)
    print(f"data: {args.n} x {args.dim}, 1,000 centres, seed 42; {args.queries} queries, k {K}; "
          f"{args.rounds} rounds, systems alternating; QPS at concurrency {CONCURRENCY}")
    houses: list[Lakehouse] = []
    chroma: Chroma | None = None
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64),
                                         timeout=aiohttp.ClientTimeout(total=3600)) as http:
            for name in names:
                houses.append(Lakehouse(name, PROFILES[name], tmp))
                await houses[-1].load(http, data)
                houses[-1].prepare(queries)
            chroma = Chroma(venv, tmp)
            loaded = await chroma.load(http, tmp / "data.npy")
            chroma.prepare(queries)
            print(f"chroma {CHROMA_VERSION}: {loaded['count']} vectors, hnsw {loaded['configuration']}")
            first = houses[0].query(http)
            await one_at_a_time(first, 50)
            _, ids = await one_at_a_time(first, args.queries)
            target = recall(ids, truth) - RECALL_SLACK
            ef, sweep = await tune_chroma(http, chroma, args.queries, truth, target)
            print("chroma recall@10 by ef_search (raw HTTP): "
                  + ", ".join(f"{e}: {r:.4f}" for e, r in sweep.items())
                  + f"; matched (>= {target:.4f}): {ef}")
            timings = await rounds(http, args, houses, chroma)
            report(args, houses, chroma, ef, timings, truth)
    finally:
        for h in houses:
            h.stop()
        if chroma is not None:
            chroma.stop()


async def rounds(http: aiohttp.ClientSession, args: argparse.Namespace, houses: list[Lakehouse],
                 chroma: Chroma) -> dict[str, Timing]:
    """Every system in turn, the order rotated each round."""
    paths: dict[str, Query | None] = {h.name: h.query(http) for h in houses}
    paths["chroma (raw HTTP)"] = chroma.query(http)
    paths["chroma (client)"] = None  # in its own process: Chroma's client is not ours
    out = {name: Timing() for name in paths}
    for fn in paths.values():
        if fn is not None:
            await one_at_a_time(fn, 50)
            await at_concurrency(fn, 200)
    order = list(paths)
    for rnd in range(args.rounds):
        for name in order[rnd % len(order):] + order[:rnd % len(order)]:
            fn, t = paths[name], out[name]
            if fn is None:
                got = await asyncio.to_thread(chroma.client, "query", "--data", str(args.qfile))
                t.ms += got["ms"]
                t.ids = t.ids or got["ids"]
                got = await asyncio.to_thread(chroma.client, "query", "--data", str(args.qfile),
                                              "--concurrency", str(CONCURRENCY))
                t.qps.append(float(got["qps"]))
                continue
            ms, ids = await one_at_a_time(fn, args.queries)
            t.ms += ms
            t.ids = t.ids or ids
            t.qps.append(await at_concurrency(fn, args.queries * 2))
    return out


def report(args: argparse.Namespace, houses: list[Lakehouse], chroma: Chroma, ef: int,
           timings: dict[str, Timing], truth: np.ndarray[Any, Any]) -> None:
    chroma_mem = mem.usage(chroma.proc.pid)
    rows = []
    for h in houses:
        vd, pg = h.memory()
        rows.append((h.name, timings[h.name], h.load_s + h.build_s, vd.pss + pg.held,
                     f"vectord {vd.pss / mem.MIB:.0f} + PostgreSQL {pg.held / mem.MIB:.0f}"))
    for name in ("chroma (raw HTTP)", "chroma (client)"):
        rows.append((f"{name}, ef_search {ef}", timings[name], chroma.load_s, chroma_mem.pss, "server"))
    c_qps = float(np.median(timings["chroma (raw HTTP)"].qps))
    print("\n| system | recall@10 | p50 ms | p95 ms | QPS at 8 | load s | memory MiB | "
          "memory / Chroma's | QPS / Chroma's |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, t, load_s, pss, parts in rows:
        q = float(np.median(t.qps))
        print(f"| {name} | {recall(t.ids, truth):.4f} | {pct(t.ms, 50):.2f} | {pct(t.ms, 95):.2f} | "
              f"{q:.0f} | {load_s:.1f} | {pss / mem.MIB:.0f} ({parts}) | "
              f"{pss / chroma_mem.pss:.2f}x | {q / c_qps:.2f}x |")
    print("\n(memory: Lakehouse's vectord PSS + PostgreSQL's held memory: its processes' own "
          "pages and its shared memory's resident pages once, scripts/bench_memory.py; "
          "Chroma's server PSS. load s: Lakehouse's HTTP load + HNSW build; "
          "Chroma's adds through its client until the first query answers. QPS: median of "
          "rounds. Targets: memory <= 1.00x Chroma's, QPS >= 1.50x, recall@10 >= 0.998.)")
    for h in houses:
        print(f"\n{h.name} ({h.profile.note}): load {h.load_s:.1f} s, "
              f"HNSW build {h.build_s:.1f} s; vectord RSS idle {h.rss['idle'] / mem.MIB:.0f} MiB, "
              f"after load {h.rss['loaded'] / mem.MIB:.0f} MiB")
        vd, pg = h.memory()
        s = mem.settings(h.pg.dsn, ("shared_buffers", "max_connections", "work_mem"))
        print(f"PostgreSQL {s}")
        print("| process | count | PSS MiB | anon | shared memory | file | RSS |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(f"| vectord | 1 | {vd.mib()} |")
        for role, u in sorted(pg.roles.items(), key=lambda x: -x[1].pss):
            print(f"| postgres: {role} | {u.count} | {u.mib()} |")
        print(f"| shared memory resident (counted once) | | {pg.shared_resident / mem.MIB:.1f} | | | | |")
        print(f"| **all: PSS sum {(vd.pss + pg.all.pss) / mem.MIB:.1f}; held (own pages + "
              f"shared resident) {(vd.pss + pg.held) / mem.MIB:.1f}** | | | | | | |")
        rel = mem.relations(h.pg.dsn)
        print("relations on disk (MiB): " + ", ".join(f"{n} {b / mem.MIB:.1f}" for n, b in rel))
        print(f"page cache of its data directory (not in PSS): "
              f"{mem.page_cache([h.pg.data_dir]) / mem.MIB:.0f} MiB; on disk "
              f"{mem.disk(h.pg.data_dir) / mem.MIB:.0f} MiB")
    print(f"\nchroma: RSS idle {chroma.rss['idle'] / mem.MIB:.0f} MiB, after load "
          f"{chroma.rss['loaded'] / mem.MIB:.0f} MiB; now PSS | anon | shm | file | RSS: "
          f"{chroma_mem.mib()}; page cache of its files {mem.page_cache([chroma.dir]) / mem.MIB:.0f} "
          f"MiB, on disk {mem.disk(chroma.dir) / mem.MIB:.0f} MiB")
    print(f"machine load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lakehouse", default="default,float32,before",
                        help=f"profiles, comma-separated: {', '.join(PROFILES)}")
    parser.add_argument("--chroma-venv", default=str(ROOT / "var" / "bench-chroma"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-chroma-"))
    args.qfile = tmp / "queries.npy"
    try:
        asyncio.run(run(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
