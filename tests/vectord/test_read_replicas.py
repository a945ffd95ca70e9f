"""Searches on a real streaming standby (`[vectord] read_dsns`), writes on the primary.

The standby is made from the tests' embedded primary with `pg_basebackup -R` and started
on its own socket; vectord reads it through internal/pg/replicas.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from internal.backup import pgbackup
from internal.config import Config
from internal.pg import embedded
from internal.stack.postgres import postmaster_pid
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"


@pytest.fixture(scope="module")
def standby(pg_dsn: str) -> Iterator[embedded.EmbeddedPostgres]:
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-standby-")) / "pg"
    subprocess.run([str(pgbackup.bin_dir() / "pg_basebackup"), "-D", str(folder), "-d", pg_dsn,
                    "-X", "stream", "-R", "-c", "fast"], check=True, capture_output=True)
    pgbackup.drop_server_files(folder)
    pgbackup.own_data_dir(folder)
    server = embedded.start(folder)
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def app(base_cfg: Config, standby: embedded.EmbeddedPostgres) -> AsyncIterator[str]:
    from internal.vectord.server import make_app

    cfg = with_section(base_cfg, "vectord", read_dsns=(standby.dsn,), max_replica_lag=1.0,
                       replica_wait=2.0)
    server = await serve(make_app(cfg))
    url = url_of(server)
    await _until(lambda r: r[0]["state"] == "ok", url)
    yield url
    await server.close()


async def _replicas(url: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/readyz") as resp:
            body = await resp.json()
    return list(body["components"]["read_replicas"])


async def _until(test: Any, url: str, seconds: float = 30.0) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        got = await _replicas(url)
        if test(got):
            return got
        assert loop.time() < deadline, got
        await asyncio.sleep(0.1)


async def _write(http: aiohttp.ClientSession, url: str, name: str, item_id: str,
                 text: str) -> str:
    async with http.post(f"{url}{C}/{name}/items", json={"items": [
            {"id": item_id, "vector": unit(8, hash(item_id) % 1000), "text": text}]}) as resp:
        assert resp.status == 200, await resp.text()
        return resp.headers["Lakehouse-LSN"]


async def _found(http: aiohttp.ClientSession, url: str, name: str, word: str,
                 lsn: str | None = None) -> list[str]:
    headers = {"Lakehouse-LSN": lsn} if lsn else {}
    async with http.post(f"{url}{C}/{name}/search", headers=headers,
                         json={"mode": "lexical", "query_text": word, "k": 5}) as resp:
        body = await resp.json()
        assert resp.status == 200, body
        return [h["id"] for h in body["hits"]]


async def test_a_write_is_seen_on_the_standby_by_a_search_carrying_its_lsn(
        app: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, app)
    before = (await _replicas(app))[0]["searches"]
    for i in range(100):
        lsn = await _write(http, app, name, f"w{i}", f"zebra{i} crossing number {i}")
        assert await _found(http, app, name, f"zebra{i}", lsn) == [f"w{i}"]
    after = (await _replicas(app))[0]
    assert after["searches"] - before == 100 and after["in_use"]  # all 100 on the standby


async def test_a_lagging_standby_leaves_the_rotation_and_returns(
        app: str, http: aiohttp.ClientSession, standby: embedded.EmbeddedPostgres) -> None:
    name = await make_corpus(http, app)
    with psycopg.connect(standby.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            await _write(http, app, name, "late", "ocelot arrives late")
            got = await _until(lambda r: r[0]["state"] == "lagging", app)
            assert "behind" in got[0]["reason"]
            # Meanwhile searches read the primary: the write is there.
            assert await _found(http, app, name, "ocelot") == ["late"]
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    await _until(lambda r: r[0]["state"] == "ok" and r[0]["in_use"], app)
    assert await _found(http, app, name, "ocelot") == ["late"]


async def test_a_killed_standby_fails_no_search_and_rejoins(
        app: str, http: aiohttp.ClientSession, standby: embedded.EmbeddedPostgres) -> None:
    name = await make_corpus(http, app)
    await _write(http, app, name, "k1", "kestrel hovering")
    failed: list[Any] = []
    done = 0
    stop = asyncio.Event()

    async def searcher() -> None:
        nonlocal done
        while not stop.is_set():
            status, body = await call(http, "POST", f"{app}{C}/{name}/search",
                                      {"mode": "lexical", "query_text": "kestrel", "k": 5})
            if status != 200 or [h["id"] for h in body["hits"]] != ["k1"]:
                failed.append((status, body))
            done += 1

    tasks = [asyncio.create_task(searcher()) for _ in range(8)]
    await asyncio.sleep(0.5)
    pid = postmaster_pid(standby.data_dir)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await _until(lambda r: r[0]["state"] == "down", app)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(standby.restart)
    await _until(lambda r: r[0]["state"] == "ok", app, seconds=60)
    await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*tasks)
    assert done > 50 and not failed, failed[:3]


async def test_an_lsn_that_does_not_parse_is_a_400_naming_it(
        app: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, app)
    async with http.post(f"{app}{C}/{name}/search", headers={"Lakehouse-LSN": "yesterday"},
                         json={"mode": "lexical", "query_text": "x"}) as resp:
        body = await resp.json()
    assert resp.status == 400 and body["error"]["field"] == "Lakehouse-LSN", body


async def test_a_read_dsn_that_is_not_a_standby_is_not_used(
        base_cfg: Config, pg_dsn: str, http: aiohttp.ClientSession) -> None:
    from internal.vectord.server import make_app

    server = await serve(make_app(with_section(base_cfg, "vectord", read_dsns=(pg_dsn,))))
    try:
        got = await _replicas(url_of(server))
        assert got[0]["state"] == "not_standby" and not got[0]["in_use"], got
        name = await make_corpus(http, url_of(server))
        assert await _found(http, url_of(server), name, "anything") == []
    finally:
        await server.close()


async def test_a_federated_search_on_the_standby_equals_the_primarys(
        app: str, vectord_url: str, http: aiohttp.ClientSession) -> None:
    """Statistics are rows like the rest: BM25 over the union of corpora is the same on the
    standby as on the primary, hits and scores, in every mode, float16 corpora beside a
    float32 one; a corpus creation answers with its position too."""
    names = []
    for j in range(3):
        async with http.post(f"{app}{C}", json={
                "name": f"fed_rep_{os.getpid()}_{j}", "dim": 8, "language": "english",
                "precision": "float32" if j == 2 else "float16"}) as resp:
            assert resp.status == 201, await resp.text()
            assert "/" in resp.headers["Lakehouse-LSN"]
            names.append(f"fed_rep_{os.getpid()}_{j}")
    lsn = ""
    for j, name in enumerate(names):
        for i in range(30):
            lsn = await _write(http, app, name, f"f{j}_{i}",
                               f"{['heron', 'otter', 'lynx'][(i + j) % 3]} river {i % 7} bank")
    for mode in ("lexical", "hybrid", "vector", "keyword"):
        body = {"corpora": names, "mode": mode, "k": 15, "query_vector": unit(8, 5),
                "query_text": "heron river" if mode == "keyword" else "heron river bank"}
        got: list[Any] = []
        for url, headers in ((app, {"Lakehouse-LSN": lsn}), (vectord_url, {})):
            async with http.post(f"{url}/v1/vectors/search", json=body,
                                 headers=headers) as resp:
                out = await resp.json()
                assert resp.status == 200, out
            got.append([(h["corpus"], h["id"], h.get("merge_score")) for h in out["hits"]])
        assert got[0] == got[1] and got[0], mode
