"""How much WAL the embedded PostgreSQL keeps after a load: PostgreSQL's default WAL
settings (max_wal_size 1 GB, min_wal_size 80 MB) against the embedded server's own
(internal.pg.embedded: 256 MB, 64 MB), alternating, each on a new data directory.

A load is --items items of random --dim-dimension vectors and short texts upserted through
vectord (in-process, over HTTP) in batches of 64, two at a time: the writes of a
`lakehouse ingest` without the embedding. pg_wal's size after the load, the data
directory's, and the load's items/s.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import aiohttp
import numpy as np
import psycopg

from bench.harness import Run
from internal.clients.vectord import VectordClient
from internal.common import logs
from internal.config import Config
from internal.pg import embedded
from internal.vectord.server import make_app
from tests.helpers import serve, url_of, with_section

OPTIONS = {"items": 12000, "dim": 384, "rounds": 1}
QUICK = {"items": 3000}
BATCH, MB = 64, 2**20
DEFAULTS = {"max_wal_size": "1GB", "min_wal_size": "80MB"}  # PostgreSQL's own
WORDS = ("wing lift drag boundary layer flow shock pressure heat transfer nozzle "
         "supersonic laminar turbulent vortex cone plate jet stream").split()


async def load(dsn: str, items: int, dim: int) -> float:
    server = await serve(make_app(with_section(Config(), "vectord", dsn=dsn, pool_min=1, pool_max=4)))
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
                    vecs = rng.standard_normal((min(BATCH, items - s), dim)).astype(np.float32)
                    batch = []
                    for i, v in enumerate(vecs):
                        words = random.choices(WORDS, k=120)
                        batch.append({"id": f"d{s + i}", "vector": v.tolist(),
                                      "title": " ".join(words[:6]), "text": " ".join(words)})
                    await vc.call("POST", "/v1/vectors/corpora/walload/items", {"items": batch})

            await asyncio.gather(worker(), worker())
            return items / (time.perf_counter() - started)
    finally:
        await server.close()


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(run: Run) -> None:
    a = run.args
    logs.configure("warning", "console", service="bench-wal")
    labels = {"defaults": "PostgreSQL defaults (1GB, 80MB)", "embedded": "embedded server (256MB, 64MB)"}
    rows = []
    for r in range(a.rounds):
        for settings in labels:
            server = embedded.start(run.folder / f"pg-{settings}-{r}")
            try:
                if settings == "defaults":
                    with psycopg.connect(server.dsn, autocommit=True) as conn:
                        for name, value in DEFAULTS.items():
                            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                        conn.execute("SELECT pg_reload_conf()")
                rate = asyncio.run(load(server.dsn, a.items, a.dim))
                rows.append((labels[settings], size(server.data_dir / "pg_wal") / MB,
                             size(server.data_dir) / MB, rate))
            finally:
                server.stop()
    run.table(f"{a.items} items of {a.dim} dimensions, batches of {BATCH}, 2 in flight; {a.rounds} "
              "round(s), alternating", ["settings", "pg_wal MB:.0f", "data dir MB:.0f", "items/s:.1f"], rows)
    before = [r for r in rows if r[0] == labels["defaults"]]
    after = [r for r in rows if r[0] == labels["embedded"]]
    run.say(f"pg_wal after / before: {max(r[1] for r in after) / max(r[1] for r in before):.2f}; "
            f"items/s after / before: {sum(r[3] for r in after) / sum(r[3] for r in before):.2f}")
