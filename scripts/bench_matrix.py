"""Benchmark matrixd's fan-out: p50 search latency over 1, 4 and 8 corpora of 10,000 items.

Starts vectord (embedded PostgreSQL in a temporary folder, or LAKEHOUSE_PG_DSN) and
matrixd as processes on free loopback ports, loads L2-normalised 384-d vectors
(clustered like real embeddings by default; --data uniform for HNSW's worst case)
straight through vectord's API, and queries matrixd by vector (so the embedding model
is not measured). Prints a table and the ratio 8 corpora / 1 corpus (target <= 2x: the
fan-out is parallel, not serial), next to the same query sent to vectord directly,
and, as the floor, the same SQL sent straight to PostgreSQL: to 1 corpus, and to the 8
corpora at once on 8 connections (what PostgreSQL itself needs on this machine's cores).

    .venv/bin/python scripts/bench_matrix.py [--items 10000] [--queries 200] [--data uniform]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_floors import DirectSearch  # noqa: E402

from internal.config import VectordConfig  # noqa: E402
from internal.pg import embedded  # noqa: E402
from internal.pg.pool import make_pool  # noqa: E402

DIM = 384
BATCH = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(name: str, env: dict[str, str], log_dir: Path, root: Path = ROOT,
          tag: str = "") -> subprocess.Popen[bytes]:
    """A daemon of the checkout at root (its own code first on the path)."""
    log = (log_dir / f"{name}{tag}.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", f"internal.{name}.server"], cwd=root,
                            env={**os.environ, **env, "LAKEHOUSE_LOG_LEVEL": "warning",
                                 "PYTHONPATH": str(root)},
                            stdout=log, stderr=subprocess.STDOUT)


async def wait_ready(session: aiohttp.ClientSession, url: str, limit: float = 180.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            async with session.get(f"{url}/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.25)
    raise SystemExit(f"{url} did not come up in {limit:.0f}s")


async def call(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    async with session.request(method, url, json=body) as r:
        out = await r.json()
        if r.status >= 400:
            raise SystemExit(f"{method} {url}: {r.status} {out}")
        return out


def vectors(kind: str, n: int, seed: int) -> npt.NDArray[np.float32]:
    """n L2-normalised vectors: 'mixture' (clustered, like real embeddings: the
    Gaussian mixture of 1,000 centres, shared by every corpus and the queries) or
    'uniform' (uniform on the sphere: no structure, the worst case for HNSW)."""
    rng = np.random.default_rng(seed)
    if kind == "mixture":
        centres = np.random.default_rng(42).standard_normal((1000, DIM)).astype(np.float32)
        vecs = centres[rng.integers(0, 1000, size=n)]
        vecs = vecs + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    else:
        vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    out: npt.NDArray[np.float32] = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    return out


async def load(session: aiohttp.ClientSession, vurl: str, names: list[str], items: int,
               kind: str) -> float:
    """Create and fill the corpora, two at a time (one upsert stream per core)."""
    started = time.perf_counter()
    gate = asyncio.Semaphore(2)
    everything = vectors(kind, items * len(names), seed=7)
    data = {name: everything[i * items:(i + 1) * items] for i, name in enumerate(names)}

    async def fill(name: str) -> None:
        async with gate:
            # Bulk load without the index, then build it once: much faster than per-row inserts.
            await call(session, "POST", f"{vurl}/v1/vectors/corpora",
                       {"name": name, "dim": DIM, "language": "english", "defer_index": True})
            vecs = data[name]
            for lo in range(0, items, BATCH):
                batch = [{"id": f"{name}-{i}", "vector": vecs[i].tolist(), "text": f"item {i}",
                          "metadata": {"i": i}} for i in range(lo, min(lo + BATCH, items))]
                await call(session, "POST", f"{vurl}/v1/vectors/corpora/{name}/items",
                           {"items": batch})
            await call(session, "POST", f"{vurl}/v1/vectors/corpora/{name}/index", {})
            print(f"  loaded and indexed {name}: {items} items", flush=True)

    await asyncio.gather(*(fill(n) for n in names))
    return time.perf_counter() - started


async def timed(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    async with session.post(url, json=body) as r:
        await r.read()
        if r.status != 200:
            raise SystemExit(f"POST {url}: {r.status}")
    return (time.perf_counter() - t0) * 1000


async def serial(session: aiohttp.ClientSession, vurl: str, names: list[str],
                 v: list[float]) -> float:
    """What a serial fan-out would cost: one corpus after another, straight to vectord."""
    t0 = time.perf_counter()
    for name in names:
        async with session.post(f"{vurl}/v1/vectors/corpora/{name}/search",
                                json={"mode": "vector", "query_vector": v, "k": 10}) as r:
            await r.read()
    return (time.perf_counter() - t0) * 1000


async def p50(session: aiohttp.ClientSession, url: str, bodies: list[dict[str, Any]],
              warmup: int = 10) -> tuple[float, float]:
    for b in bodies[:warmup]:
        await timed(session, url, b)
    times = [await timed(session, url, b) for b in bodies]
    return statistics.median(times), float(np.percentile(times, 95))


async def direct_sql(dsn: str, names: list[str], queries: list[list[float]]
                     ) -> list[tuple[str, float, float]]:
    """p50/p95 of vectord's SQL sent straight to PostgreSQL: 1 corpus, then 8 at once."""
    ef = VectordConfig().ef_search
    pool = make_pool(dsn, len(names), len(names))
    await pool.open(wait=True)
    try:
        direct = DirectSearch(pool)
        stmts = {name: await direct.statement(name) for name in names}
        qs = [np.asarray(v, dtype=np.float32) for v in queries]

        async def one(name: str, q: npt.NDArray[np.float32]) -> None:
            await direct.run(stmts[name], q, 10, ef)

        rows = []
        for n in (1, 8):
            for q in qs[:10]:
                await asyncio.gather(*(one(name, q) for name in names[:n]))
            times = []
            for q in qs:
                t0 = time.perf_counter()
                await asyncio.gather(*(one(name, q) for name in names[:n]))
                times.append((time.perf_counter() - t0) * 1000)
            rows.append((f"floor: SQL direct, {n} corpora", statistics.median(times),
                         float(np.percentile(times, 95))))
        return rows
    finally:
        await pool.close()


async def bench(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-matrix-"))
    pg = embedded.start(tmp / "pg")
    vport, mport = free_port(), free_port()
    vurl, murl = f"http://127.0.0.1:{vport}", f"http://127.0.0.1:{mport}"
    procs = [
        start("vectord", {"LAKEHOUSE_VECTORD_PORT": str(vport),
                          "LAKEHOUSE_PG_DSN": pg.dsn}, tmp),
        start("matrixd", {"LAKEHOUSE_MATRIXD_PORT": str(mport),
                          "LAKEHOUSE_MATRIXD_VECTORD_URL": vurl,
                          "LAKEHOUSE_MATRIXD_EMBEDD_URL": ""}, tmp),
    ]
    base_murl = ""
    if args.baseline:
        bv, bm = free_port(), free_port()
        bvurl, base_murl = f"http://127.0.0.1:{bv}", f"http://127.0.0.1:{bm}"
        procs += [
            start("vectord", {"LAKEHOUSE_VECTORD_PORT": str(bv), "LAKEHOUSE_PG_DSN": pg.dsn},
                  tmp, args.baseline, "-baseline"),
            start("matrixd", {"LAKEHOUSE_MATRIXD_PORT": str(bm),
                              "LAKEHOUSE_MATRIXD_VECTORD_URL": bvurl,
                              "LAKEHOUSE_MATRIXD_EMBEDD_URL": ""}, tmp, args.baseline,
                  "-baseline")]
    names = [f"bench_mx_{os.getpid()}_{i}" for i in range(8)]
    compared: list[tuple[str, float, float]] = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
            await wait_ready(s, vurl)
            await wait_ready(s, murl)
            if base_murl:
                await wait_ready(s, base_murl)
            print(f"loading 8 corpora x {args.items} L2-normalised {DIM}-d vectors ({args.data})")
            load_s = await load(s, vurl, names, args.items, args.data)
            q = vectors(args.data, args.queries, seed=8)
            queries = [v.tolist() for v in q]

            rows: list[tuple[str, float, float]] = []
            direct = [{"mode": "vector", "query_vector": v, "k": 10} for v in queries]
            rows.append(("vectord direct, 1 corpus",
                         *await p50(s, f"{vurl}/v1/vectors/corpora/{names[0]}/search", direct)))
            for n in (1, 4, 8):
                bodies = [{"mode": "vector", "query_vector": v, "k": 10, "corpora": names[:n]}
                          for v in queries]
                rows.append((f"matrixd, {n} corpora", *await p50(s, f"{murl}/v1/matrix/search",
                                                                    bodies)))
            serial_ms = [await serial(s, vurl, names, v) for v in queries]
            rows.append(("serial fan-out (reference)", statistics.median(serial_ms),
                         float(np.percentile(serial_ms, 95))))
            rows += await direct_sql(pg.dsn, names, queries)
            if base_murl:
                # This checkout vs the baseline's matrixd + vectord on the same data,
                # alternating slices of queries so both see the same machine.
                for n in (1, 8):
                    bodies = [{"mode": "vector", "query_vector": v, "k": 10,
                               "corpora": names[:n]} for v in queries]
                    mine: list[float] = []
                    theirs: list[float] = []
                    for lo in range(0, len(bodies), 25):
                        for b in bodies[lo:lo + 25]:
                            mine.append(await timed(s, f"{murl}/v1/matrix/search", b))
                        for b in bodies[lo:lo + 25]:
                            theirs.append(await timed(s, f"{base_murl}/v1/matrix/search", b))
                    compared.append((f"{n} corpora", statistics.median(mine),
                                     statistics.median(theirs)))
            for name in names:
                await call(s, "DELETE", f"{vurl}/v1/vectors/corpora/{name}")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    one = rows[1][1]
    print(f"\nload: {8 * args.items} vectors in {load_s:.1f} s; {args.queries} sequential "
          f"queries per row, k=10, cpus={os.cpu_count()}")
    print(f"{'setup':<28}{'p50 ms':>10}{'p95 ms':>10}{'p50 / 1 corpus':>16}")
    for label, med, p95 in rows:
        print(f"{label:<28}{med:>10.2f}{p95:>10.2f}{med / one:>15.2f}x")
    ratio = rows[3][1] / one
    floor = rows[6][1] / rows[5][1]
    print("\n(the reference row sends the same query to the 8 corpora one after another)")
    print(f"floor: PostgreSQL alone, 8 corpora at once / 1 corpus = {floor:.2f}x "
          f"on {os.cpu_count()} cores")
    verdict = "meets" if ratio <= 2.0 else "misses"
    print(f"\n8 corpora / 1 corpus p50 = {ratio:.2f}x ({verdict} the <= 2x target)")
    if compared:
        print(f"\nthis checkout vs baseline {args.baseline} (alternating slices of 25 queries)")
        print(f"{'matrixd':<14}{'this p50 ms':>13}{'baseline p50 ms':>17}{'this / baseline':>17}")
        for label, mine_ms, base_ms in compared:
            print(f"{label:<14}{mine_ms:>13.2f}{base_ms:>17.2f}{mine_ms / base_ms:>16.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10_000, help="items per corpus")
    ap.add_argument("--queries", type=int, default=200, help="queries per setup")
    ap.add_argument("--data", choices=("mixture", "uniform"), default="mixture",
                    help="clustered like real embeddings (default), or uniform on the sphere")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout (e.g. a worktree of an older main) whose matrixd "
                         "and vectord are measured in the same run on the same data")
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
