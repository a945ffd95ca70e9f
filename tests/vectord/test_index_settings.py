"""Per-corpus vector index settings (m, ef_construction, ef_search, exact_scan_rows): set at
creation, changed online (a new graph built in the background while searches go on),
kept across a restart; and filtered searches that keep k hits and their recall when the
filter is selective (internal.vectord.storage.reindex, storage/searches.py's exact_scan)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import numpy as np
import psycopg

from internal.config import Config
from internal.vectord.server import make_app
from tests.helpers import serve, url_of
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"


async def reloptions(dsn: str, name: str) -> dict[str, str]:
    """The corpus's HNSW index's m and ef_construction as PostgreSQL holds them."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT c.reloptions FROM pg_class c WHERE c.relname = "
            "(SELECT 'vectord_items_' || id || '_hnsw' FROM vectord_corpora WHERE name = %s)",
            (name,))
        row = await cur.fetchone()
    assert row is not None and row[0], row
    return dict(opt.split("=", 1) for opt in row[0])


async def test_settings_at_creation_shown_checked_and_kept_across_a_restart(
        base_cfg: Config, pg_dsn: str, vectord_url: str, http: aiohttp.ClientSession) -> None:
    settings = {"m": 12, "ef_construction": 40, "ef_search": 77, "exact_scan_rows": 321}
    name = await make_corpus(http, vectord_url, dim=8, index=settings)
    status, out = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert status == 200 and out["index"] == settings and "reindex" not in out, out
    assert await reloptions(pg_dsn, name) == {"m": "12", "ef_construction": "40"}
    # A corpus that names none has the service's defaults, listed as well.
    plain = await make_corpus(http, vectord_url, dim=8)
    status, every = await call(http, "GET", f"{vectord_url}{C}")
    listed = {c["name"]: c["index"] for c in every["corpora"]}
    vd = base_cfg.vectord
    assert listed[plain] == {"m": vd.hnsw_m, "ef_construction": vd.hnsw_ef_construction,
                             "ef_search": vd.ef_search, "exact_scan_rows": vd.exact_scan_rows}
    assert listed[name] == settings
    # Another vectord over the same database (a restart) reads them from PostgreSQL.
    server = await serve(make_app(base_cfg))
    try:
        status, out = await call(http, "GET", f"{url_of(server)}{C}/{name}")
        assert status == 200 and out["index"] == settings, out
    finally:
        await server.close()
    # Search-time settings change at once, without a rebuild (200).
    status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/index/settings",
                             {"ef_search": 200})
    assert status == 200 and out["index"]["ef_search"] == 200 and "reindex" not in out, out
    # Bad settings: 400 naming the field, nothing changed.
    for body, field in (({"m": 1}, "m"), ({"ef_construction": 20}, "ef_construction"),
                        ({"ef_search": 0}, "ef_search"), ({"exact_scan_rows": -1}, "exact_scan_rows"),
                        ({"mm": 3}, "mm")):
        status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/index/settings", body)
        assert status == 400 and out["error"]["field"] == field, (body, out)
    status, out = await call(http, "POST", f"{vectord_url}{C}",
                             {"name": name + "x", "dim": 8, "index": {"m": 32, "ef_construction": 40}})
    assert status == 400 and out["error"]["field"] == "index.ef_construction", out
    status, out = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert out["index"] == {**settings, "ef_search": 200}


DIM = 16
N = 3000


async def test_graph_rebuilt_online_under_searches_with_no_failure(
        pg_dsn: str, vectord_url: str, http: aiohttp.ClientSession) -> None:
    """A new m and ef_construction: 202, the graph rebuilt CONCURRENTLY while vector,
    hybrid and filtered searches and writes run; not one fails, the switch happens once,
    PostgreSQL's index then has the new settings."""
    name = await make_corpus(http, vectord_url, dim=DIM)
    url = f"{vectord_url}{C}/{name}"
    for start in range(0, N, 1000):
        status, out = await call(http, "POST", f"{url}/items", {"items": [
            {"id": f"d{i:05d}", "vector": unit(DIM, i), "text": f"heron note {i}",
             "tags": ["even" if i % 2 == 0 else "odd"]} for i in range(start, start + 1000)]})
        assert status == 200, out
    stop = asyncio.Event()
    failed: list[Any] = []
    searched = 0

    async def searcher(body: dict[str, Any]) -> None:
        nonlocal searched
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                status, out = await call(s, "POST", f"{url}/search", {
                    **body, "query_vector": unit(DIM, 10_000 + searched), "k": 5})
                if status != 200 or len(out["hits"]) != 5:
                    failed.append((body, status, out))
                searched += 1

    async def writer() -> None:
        i = 0
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                status, out = await call(s, "POST", f"{url}/items", {"items": [
                    {"id": f"w{i}", "vector": unit(DIM, 50_000 + i), "text": "written heron"}]})
                if status != 200:
                    failed.append(("write", status, out))
                i += 1
                await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(searcher(b)) for b in (
        {"mode": "vector"}, {"mode": "hybrid", "query_text": "heron"},
        {"mode": "vector", "filter": {"tags_any": ["even"]}})]
    tasks.append(asyncio.create_task(writer()))
    seen: list[tuple[int, bool]] = []
    try:
        await asyncio.sleep(0.3)
        status, started = await call(http, "POST", f"{url}/index/settings",
                                     {"m": 8, "ef_construction": 32})
        assert status == 202 and started["reindex"] == {
            "m": 8, "ef_construction": 32, "state": "building", "error": None}, started
        # The graph in force is still the old one until the switch.
        assert started["index"]["m"] == 16, started
        status, again = await call(http, "POST", f"{url}/index/settings", {"m": 10})
        assert status == 409 and again["error"]["code"] == "reembed_running", again
        for _ in range(600):
            status, out = await call(http, "GET", url)
            assert status == 200, out
            seen.append((out["index"]["m"], "reindex" in out))
            if out["index"]["m"] == 8 and "reindex" not in out:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # searches on the new graph too
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert not failed, failed[:5]
    assert searched > 30
    assert (16, True) in seen and seen[-1] == (8, False), seen
    assert await reloptions(pg_dsn, name) == {"m": "8", "ef_construction": "32"}
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = "
            "(SELECT 'vectord_items_' || id FROM vectord_corpora WHERE name = %s) "
            "AND indexdef LIKE '%%USING hnsw%%'", (name,))
        assert (await cur.fetchone()) == (1,)  # the old graph is gone


FN = 20_000  # items: a graph large enough to be walked, small enough for the suite
FDIM = 32


async def test_a_selective_filter_returns_k_hits_with_their_recall(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    """Filters selecting 0.1%, 1% and 10% of 20,000 items, k 10, against the exact top
    10 of the filtered items. The exact-scan threshold is lowered to 1,000 items, so the
    corpus is walked by its graph for the 10% filter and scanned exactly for the others;
    with the threshold at 0 (the graph's answer as it is) the 10% filter keeps its recall."""
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((20, FDIM)).astype(np.float32)
    data = centres[rng.integers(0, 20, FN)] + 0.6 * rng.standard_normal((FN, FDIM)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    share = {"rare": 0.001, "one": 0.01, "tenth": 0.1}
    picks = {tag: set(rng.choice(FN, int(FN * s), replace=False).tolist()) for tag, s in share.items()}
    name = await make_corpus(http, vectord_url, dim=FDIM, defer_index=True,
                             index={"exact_scan_rows": 1000})
    url = f"{vectord_url}{C}/{name}"
    for start in range(0, FN, 1000):
        items = [{"id": f"x{i:05d}", "vector": [float(x) for x in data[i]], "text": "t",
                  "tags": [t for t, ids in picks.items() if i in ids],
                  "metadata": {"kind": "rare" if i in picks["rare"] else "common"}}
                 for i in range(start, start + 1000)]
        status, out = await call(http, "POST", f"{url}/items", {"items": items})
        assert status == 200, out
    status, out = await call(http, "POST", f"{url}/index")
    assert status == 200, out
    queries = rng.standard_normal((20, FDIM)).astype(np.float32)
    queries = centres[rng.integers(0, 20, 20)] + 0.6 * queries

    async def recall(flt: dict[str, Any], ids: set[int], mode: str = "vector",
                     full: bool = True) -> float:
        rows = np.array(sorted(ids))
        got = 0
        for q in queries:
            sims = data[rows] @ (q / np.linalg.norm(q))
            truth = {f"x{rows[j]:05d}" for j in np.argsort(-sims)[:10]}
            status, out = await call(http, "POST", f"{url}/search", {
                "mode": mode, "query_vector": [float(x) for x in q], "query_text": "t",
                "k": 10, "filter": flt})
            assert status == 200, out
            found = [h["id"] for h in out["hits"]]
            assert len(found) == 10 or not full, (flt, mode, found)
            assert all(int(i[1:]) in ids for i in found), (flt, found)
            got += len(truth & set(found))
        return got / (10 * len(queries))

    for threshold in (1000, 0):
        status, out = await call(http, "POST", f"{url}/index/settings",
                                 {"exact_scan_rows": threshold})
        assert status == 200, out
        for tag, ids in picks.items():
            r = await recall({"tags_any": [tag]}, ids, full=bool(threshold) or tag == "tenth")
            if threshold or tag == "tenth":
                assert r >= 0.95, (threshold, tag, r)
        if threshold:  # a metadata filter and hybrid's vector branch take the same plan
            assert await recall({"metadata": {"kind": "rare"}}, picks["rare"]) >= 0.95
            await recall({"tags_any": ["rare"]}, picks["rare"], "hybrid")
