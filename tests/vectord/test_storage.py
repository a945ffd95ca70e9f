"""Memory a person can see: GET /v1/vectors/storage (per corpus its rows, table and index
bytes and whether its index fits in shared_buffers; the memory held; the warm-up), the
same figures in the gateway's /metrics and in `lakehouse status`; and the warm-up a
vectord runs at start, searches answering meanwhile."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import msgspec

from internal.cli.storage_view import conversion_lines, storage_lines
from internal.config import Config
from internal.gateway.server import make_app as make_gateway
from internal.vectord.server import make_app as make_vectord
from lakehouse.types import Corpus
from lakehouse.wire.storage import StorageStatus
from tests.helpers import serve, url_of, with_section
from tests.vectord.test_precision import DIM, corpus
from tests.vectord.vdata import call, unit

N = 2000


async def test_storage_shows_each_corpus_and_the_memory_held(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    names = {p: await corpus(http, vectord_url, p, N) for p in ("float16", "float32")}
    status, body = await call(http, "GET", f"{vectord_url}/v1/vectors/storage")
    assert status == 200, body
    got = msgspec.convert(body, StorageStatus)
    rows = {c.name: c for c in got.corpora}
    half, full = rows[names["float16"]], rows[names["float32"]]
    assert half.rows == full.rows == N
    assert (half.precision, full.precision) == ("float16", "float32")
    # Half the bytes a vector: the table and the graph are smaller, never larger.
    assert 0 < half.table_bytes < full.table_bytes and 0 < half.index_bytes < full.index_bytes
    assert half.index_fits_shared_buffers and got.shared_buffers_bytes >= 128 * 2**20
    assert got.memory.vectord_bytes > 10 * 2**20
    assert got.memory.postgres_bytes is not None and got.memory.postgres_bytes > 0
    # `lakehouse status` prints them: a row per corpus, its precision and fit.
    printed = "\n".join(storage_lines(got))
    assert re.search(rf"{names['float16']}\s+float16\s+2,000\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+yes",
                     printed), printed
    assert "memory held: vectord" in printed


async def test_metrics_show_the_corpora_sizes(base_cfg: Config, vectord_url: str,
                                              http: aiohttp.ClientSession) -> None:
    name = await corpus(http, vectord_url, "float16", 50)
    cfg = with_section(base_cfg, "gateway", vectord=(vectord_url,))
    gateway = await serve(make_gateway(cfg))
    try:
        async with http.get(f"{url_of(gateway)}/metrics") as resp:
            text = await resp.text()
    finally:
        await gateway.close()
    labels = f'{{corpus="{name}",precision="float16"}}'
    assert f"lakehouse_corpus_rows{labels} 50.0" in text, text[-3000:]
    assert re.search(rf"lakehouse_corpus_index_bytes{re.escape(labels)} [1-9]", text)
    assert f"lakehouse_corpus_index_fits_shared_buffers{labels} 1.0" in text
    assert re.search(r'lakehouse_memory_held_bytes\{process="postgres"\} [1-9]', text)


def test_status_shows_a_conversion_under_way() -> None:
    c = msgspec.convert({"name": "docs", "dim": 8, "metric": "cosine", "language": "english",
                         "model": None, "count": 10, "created_at": "2026-01-01T00:00:00Z",
                         "precision": "float32", "conversion": {
                             "precision": "float16", "done": 4, "total": 10}}, Corpus)
    rows, notes = conversion_lines([c])
    assert rows == [("convert", "running",
                     "corpus docs: float32 -> float16, 4 of 10 items copied (40%)")]
    assert notes == []


async def test_a_started_vectord_warms_its_corpora_while_searches_answer(
        base_cfg: Config, vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await corpus(http, vectord_url, "float16", 500)
    server = await serve(make_vectord(base_cfg))
    url = url_of(server)
    try:
        status, out = await call(http, "POST", f"{url}/v1/vectors/corpora/{name}/search",
                                 {"mode": "vector", "query_vector": unit(DIM, 3), "k": 3})
        assert status == 200 and out["hits"][0]["id"] == "d0003", out
        for _ in range(300):
            status, ready = await call(http, "GET", f"{url}/readyz")
            warm = ready["components"]["warmup"]
            if warm["state"] == "done":
                break
            await asyncio.sleep(0.1)
        assert warm["state"] == "done" and warm["method"] == "files", warm
        assert warm["done_bytes"] > 0 and warm["corpora"] >= 1, warm
    finally:
        await server.close()
