"""How much WAL the embedded PostgreSQL keeps after a load: PostgreSQL's default WAL
settings (max_wal_size 1 GB, min_wal_size 80 MB) against the embedded server's own
(internal.pg.embedded: 256 MB, 64 MB), alternating, each on a new data directory.

A load is `--items` items of random `--dim`-dimension vectors and short texts upserted
through vectord (in-process, over HTTP) in batches of 64, two at a time: the writes
of a `lakehouse ingest` without the embedding. Printed: pg_wal's size after the load,
the data directory's, and the load's items/s.

    python scripts/bench_wal.py [--items 12000] [--dim 384] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from internal.clients.vectord import VectordClient
from internal.common import logs
from internal.config import Config
from internal.pg import embedded
from internal.vectord.server import make_app
from tests.helpers import serve, url_of, with_section

BATCH = 64
# PostgreSQL's own defaults for the settings the embedded server changes.
DEFAULTS = {"max_wal_size": "1GB", "min_wal_size": "80MB"}
WORDS = ("wing lift drag boundary layer flow shock pressure heat transfer nozzle "
         "supersonic laminar turbulent vortex cone plate jet stream").split()


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _items(start: int, n: int, dim: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    out = []
    for i in range(n):
        words = random.choices(WORDS, k=120)
        out.append({"id": f"d{start + i}", "vector": vecs[i].tolist(),
                    "title": " ".join(words[:6]), "text": " ".join(words)})
    return out


async def _load(dsn: str, items: int, dim: int) -> float:
    cfg = with_section(Config(), "vectord", dsn=dsn, pool_min=1, pool_max=4)
    server = await serve(make_app(cfg))
    rng = np.random.default_rng(7)
    random.seed(7)
    try:
        async with aiohttp.ClientSession() as http:
            vc = VectordClient(http, url_of(server), timeout=600)
            await vc.create_corpus("walload", dim)
            starts = list(range(0, items, BATCH))
            started = time.perf_counter()

            async def worker() -> None:
                while starts:
                    s = starts.pop(0)
                    batch = _items(s, min(BATCH, items - s), dim, rng)
                    await vc.call("POST", "/v1/vectors/corpora/walload/items", {"items": batch})

            await asyncio.gather(worker(), worker())
            return items / (time.perf_counter() - started)
    finally:
        await server.close()


def run(settings: str, items: int, dim: int) -> tuple[int, int, float]:
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-wal-"))
    server = embedded.start(tmp / "pg")
    try:
        if settings == "defaults":
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                for name, value in DEFAULTS.items():
                    conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        psycopg.sql.Identifier(name), psycopg.sql.Literal(value)))
                conn.execute("SELECT pg_reload_conf()")
        rate = asyncio.run(_load(server.dsn, items, dim))
        return _size(server.data_dir / "pg_wal"), _size(server.data_dir), rate
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=12000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    logs.configure("warning", "console", service="bench-wal")
    rows: dict[str, list[tuple[int, int, float]]] = {"defaults": [], "embedded": []}
    for _ in range(args.rounds):
        for settings in ("defaults", "embedded"):
            rows[settings].append(run(settings, args.items, args.dim))
    mb = 1024 * 1024
    print(f"{args.items} items of {args.dim} dimensions, batches of {BATCH}, 2 in flight; "
          f"{args.rounds} round(s), alternating")
    print(f"{'settings':<34} {'pg_wal MB':>10} {'data dir MB':>12} {'items/s':>9}")
    for settings, label in (("defaults", "PostgreSQL defaults (1GB, 80MB)"),
                            ("embedded", "embedded server (256MB, 64MB)")):
        for wal, data, rate in rows[settings]:
            print(f"{label:<34} {wal / mb:>10.0f} {data / mb:>12.0f} {rate:>9.1f}")
    wal_before = max(w for w, _, _ in rows["defaults"])
    wal_after = max(w for w, _, _ in rows["embedded"])
    rate_before = sum(r for _, _, r in rows["defaults"]) / args.rounds
    rate_after = sum(r for _, _, r in rows["embedded"]) / args.rounds
    print(f"pg_wal after / before: {wal_after / wal_before:.2f}; "
          f"items/s after / before: {rate_after / rate_before:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
