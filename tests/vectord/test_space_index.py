"""The shared vector index of an embedding space (internal.vectord.storage.space_index).

The corpora of one (dimension, metric, model) have their vectors in one shared table
with one HNSW graph, kept by triggers in the writer's transaction; a search over most of
a space's corpora reads it once. These tests give their corpora a model label of their
own, so their space holds only them, and check: the shared path is taken (the space's
index is scanned), it ranks the split corpora exactly as the corpus holding their union
(every mode, feedback on), writes are seen at once, a delete hides at once and is
reclaimed in the background, a model label given later moves the corpus to its space
(where it keeps no copy until a second corpus joins), and a corpus from before spaces is attached at start-up with the same results.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import aiohttp
import psycopg
import pytest
from aiohttp.test_utils import TestServer

from internal.config import Config
from internal.vectord.server import make_app
from tests.helpers import serve, url_of
from tests.vectord.test_federation import QUERIES, _docs
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"
DIM = 8


def _part(doc_id: str) -> int:
    return hashlib.sha256(doc_id.encode()).digest()[0] % 3


async def _fill(http: aiohttp.ClientSession, base: str, docs: list[dict[str, Any]],
                model: str | None) -> str:
    name = await make_corpus(http, base, dim=DIM)
    status, body = await call(http, "POST", f"{base}{C}/{name}/items",
                              {"items": docs, "model": model})
    assert status == 200, body
    return name


async def _space_of(pg_dsn: str, name: str) -> int | None:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT space_id FROM vectord_corpora WHERE name = %s", (name,))
        row = await cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])


async def _rows_in_space(pg_dsn: str, space: int, name: str) -> int:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute(
            f"SELECT count(*) FROM vectord_space_{space} s JOIN vectord_corpora c "
            "ON c.id = s.corpus_id WHERE c.name = %s", (name,))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _pending(pg_dsn: str) -> int:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT count(*) FROM vectord_space_pending")
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _applied(pg_dsn: str) -> None:
    """Wait until the applier has taken every write into the shared graphs."""
    for _ in range(80):
        if await _pending(pg_dsn) == 0:
            return
        await asyncio.sleep(0.25)
    raise AssertionError("writes still pending for the shared index")


async def _index_scans(pg_dsn: str, space: int) -> int:
    """Reads of the space's table (by its HNSW graph, or scanned whole when so small
    that the planner prefers it)."""
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables "
            "WHERE relname = %s", (f"vectord_space_{space}",))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _scanned_since(pg_dsn: str, space: int, before: int) -> bool:
    """The space's index was scanned since `before` (statistics land within a second)."""
    for _ in range(40):
        if await _index_scans(pg_dsn, space) > before:
            return True
        await asyncio.sleep(0.25)
    return False


@pytest.fixture(scope="module")
async def split(vectord_url: str) -> dict[str, Any]:
    """The data set split in three, alone in their space, and as one corpus in another
    (another model label, same vectors: the union's own graph is the reference)."""
    docs = _docs()
    model = f"space-test-{uuid.uuid4().hex[:8]}"
    async with aiohttp.ClientSession() as http:
        union = await _fill(http, vectord_url, docs, f"{model}-whole")
        parts = [await _fill(http, vectord_url, [d for d in docs if _part(d["id"]) == i], model)
                 for i in range(3)]
    return {"union": union, "parts": parts, "model": model}


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]], what: Any) -> None:
    """The same ids in the same order, with the same scores and distances (to 1e-9)."""
    assert [h["id"] for h in got] == [h["id"] for h in want], what
    for g, w in zip(got, want, strict=True):
        for key in ("score", "distance"):
            if w[key] is None:
                assert g[key] is None, (what, key)
            else:
                assert g[key] == pytest.approx(w[key], rel=1e-9, abs=1e-12), (what, key, g["id"])
        if w["score"] is not None:  # vector mode's ranks are each corpus's own
            assert g["ranks"] == w["ranks"], (what, g["id"])


async def _one(http: aiohttp.ClientSession, base: str, name: str,
               search: dict[str, Any]) -> list[dict[str, Any]]:
    status, body = await call(http, "POST", f"{base}{C}/{name}/search", search)
    assert status == 200, body
    return list(body["hits"])


async def _many(http: aiohttp.ClientSession, base: str, names: list[str],
                search: dict[str, Any]) -> list[dict[str, Any]]:
    status, body = await call(http, "POST", f"{base}{M}", {**search, "corpora": names})
    assert status == 200, body
    assert all("error" not in r for r in body["results"]), body["results"]
    return list(body["hits"])


async def test_split_corpora_read_the_shared_index_and_rank_as_their_union(
        vectord_url: str, pg_dsn: str, split: dict[str, Any],
        http: aiohttp.ClientSession) -> None:
    space = await _space_of(pg_dsn, split["parts"][0])
    assert space is not None
    assert {await _space_of(pg_dsn, n) for n in split["parts"]} == {space}
    assert await _space_of(pg_dsn, split["union"]) not in (None, space)
    status, body = await call(http, "GET", f"{vectord_url}/v1/vectors/spaces")
    assert status == 200
    mine = [s for s in body["spaces"] if s["model"] == split["model"]]
    assert len(mine) == 1 and set(mine[0]["corpora"]) == set(split["parts"])

    await _applied(pg_dsn)
    before = await _index_scans(pg_dsn, space)
    for i, query in enumerate(QUERIES):
        for search in (
                {"mode": "vector", "query_vector": unit(DIM, 7 + i), "k": 10},
                {"mode": "hybrid", "query_text": query, "query_vector": unit(DIM, 7 + i),
                 "k": 10, "candidates": 20, "fusion": "rrf"},
                {"mode": "hybrid", "query_text": query, "query_vector": unit(DIM, 7 + i),
                 "k": 10, "candidates": 20, "fusion": "weighted",
                 "prf": {"docs": 3, "terms": 5, "weight": 0.5, "vector": True}}):
            want = await _one(http, vectord_url, split["union"], search)
            got = await _many(http, vectord_url, split["parts"], search)
            _same(got, want, (query, search["mode"], search.get("fusion")))
    assert await _scanned_since(pg_dsn, space, before)


async def test_writes_are_seen_at_once_and_a_delete_is_reclaimed(
        vectord_url: str, pg_dsn: str, split: dict[str, Any],
        http: aiohttp.ClientSession) -> None:
    model = split["model"]
    a = await _fill(http, vectord_url, [{"id": "x1", "vector": unit(DIM, 1), "text": "one"}],
                    model)
    b = await _fill(http, vectord_url, [{"id": "y1", "vector": unit(DIM, 2), "text": "two"}],
                    model)
    space = await _space_of(pg_dsn, a)
    assert space is not None
    target = unit(DIM, 99)
    search = {"mode": "vector", "query_vector": target, "k": 3}
    names = [a, b, *split["parts"]]
    # A new item nearest the query: the next search finds it first.
    status, out = await call(http, "POST", f"{vectord_url}{C}/{a}/items",
                             {"items": [{"id": "x2", "vector": target, "text": "new"}],
                              "model": model})
    assert status == 200, out
    hits = await _many(http, vectord_url, names, search)
    assert (hits[0]["corpus"], hits[0]["id"]) == (a, "x2")
    assert hits[0]["distance"] == pytest.approx(0.0, abs=1e-6)
    # Its vector moved far away: no longer first.
    status, out = await call(http, "POST", f"{vectord_url}{C}/{a}/items",
                             {"items": [{"id": "x2", "vector": [-x for x in target],
                                         "text": "moved"}], "model": model})
    assert status == 200, out
    hits = await _many(http, vectord_url, names, search)
    assert (hits[0]["corpus"], hits[0]["id"]) != (a, "x2")
    # Deleted items and corpora are gone from the very next search.
    status, out = await call(http, "POST", f"{vectord_url}{C}/{a}/items/delete",
                             {"ids": ["x2"]})
    assert status == 200, out
    for _ in range(80):  # the applier takes the changes into the shared graph
        if await _rows_in_space(pg_dsn, space, a) == 1:
            break
        await asyncio.sleep(0.25)
    assert await _rows_in_space(pg_dsn, space, a) == 1
    status, out = await call(http, "DELETE", f"{vectord_url}{C}/{b}")
    assert status == 200, out
    status, body = await call(http, "POST", f"{vectord_url}{M}",
                              {**search, "corpora": [a, *split["parts"]], "k": 50})
    assert status == 200 and all(h["corpus"] != b for h in body["hits"])
    # Its rows leave the space in the background.
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        for _ in range(40):
            cur = await conn.execute("SELECT count(*) FROM vectord_space_reclaim")
            row = await cur.fetchone()
            if row and row[0] == 0:
                break
            await asyncio.sleep(0.25)
        cur = await conn.execute(f"SELECT count(*) FROM vectord_space_{space} WHERE id = 'y1'")
        row = await cur.fetchone()
        assert row is not None and row[0] == 0


async def test_a_model_label_given_later_moves_the_corpus(
        vectord_url: str, pg_dsn: str, http: aiohttp.ClientSession) -> None:
    name = await _fill(http, vectord_url, [{"id": "a", "vector": unit(DIM, 5), "text": "a"}],
                       None)
    unlabeled = await _space_of(pg_dsn, name)
    assert unlabeled is not None
    model = f"later-{uuid.uuid4().hex[:8]}"
    status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/items",
                             {"items": [{"id": "b", "vector": unit(DIM, 6), "text": "b"}],
                              "model": model})
    assert status == 200, out
    labeled = await _space_of(pg_dsn, name)
    assert labeled is not None and labeled != unlabeled
    # Alone in its space: no copy there (only a search over two corpora reads it) ...
    assert await _rows_in_space(pg_dsn, labeled, name) == 0
    # ... until a second corpus joins: both copied, in the joining transaction.
    other = await _fill(http, vectord_url, [{"id": "c", "vector": unit(DIM, 7), "text": "c"}],
                        model)
    assert await _space_of(pg_dsn, other) == labeled
    await _applied(pg_dsn)
    assert await _rows_in_space(pg_dsn, labeled, name) == 2
    assert await _rows_in_space(pg_dsn, labeled, other) == 1
    hits = await _many(http, vectord_url, [name, other],
                       {"mode": "vector", "query_vector": unit(DIM, 7), "k": 3})
    assert [h["id"] for h in hits][:1] == ["c"] and len(hits) == 3


async def test_a_corpus_from_before_spaces_is_attached_at_start_up(
        base_cfg: Config, vectord_url: str, pg_dsn: str, split: dict[str, Any],
        http: aiohttp.ClientSession) -> None:
    """The layout before spaces: corpora with their own tables and no space. A vectord
    starting on it attaches them (resumably: one corpus a transaction) and answers the
    same. (The triggers and space rows are removed by hand to make that layout.)"""
    names = split["parts"]
    search = {"mode": "hybrid", "query_text": "solar wind", "query_vector": unit(DIM, 3),
              "k": 10}
    await _applied(pg_dsn)
    want = await _many(http, vectord_url, names, search)
    space = await _space_of(pg_dsn, names[0])
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        for name in names:
            cur = await conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (name,))
            row = await cur.fetchone()
            assert row is not None
            cid = int(row[0])
            for trigger in ("vectord_space_ins", "vectord_space_upd", "vectord_space_del"):
                await conn.execute(f"DROP TRIGGER {trigger} ON vectord_items_{cid}")
            await conn.execute(f"DELETE FROM vectord_space_{space} WHERE corpus_id = %s", (cid,))
            await conn.execute("UPDATE vectord_corpora SET space_id = NULL WHERE id = %s", (cid,))
    assert await _space_of(pg_dsn, names[0]) is None
    server: TestServer = await serve(make_app(base_cfg))
    try:
        for _ in range(80):
            if all([await _space_of(pg_dsn, n) is not None for n in names]):
                break
            await asyncio.sleep(0.25)
        assert [await _space_of(pg_dsn, n) for n in names] == [space] * len(names)
        got = await _many(http, url_of(server), names, search)
        _same(got, want, "attached at start-up")
        await _applied(pg_dsn)
        got = await _many(http, url_of(server), names, search)
        _same(got, want, "attached at start-up, read from the shared index")
        for name in names:
            assert await _rows_in_space(pg_dsn, space or 0, name) > 0
    finally:
        await server.close()
