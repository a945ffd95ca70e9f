"""Corpora in both precisions (float16: halfvec, the default; float32: vector), side by
side on the tests' vectord and embedded PostgreSQL: the precision is kept in the table's
column and shown in the corpus; every search mode, feedback, diversity, an exact scan (no
vector index yet), a federated search over both and an item read answer alike in both;
a corpus moves from one precision to the other online, searches and writes going on,
with one switch (internal.vectord.storage.convert); and a database from before
precisions keeps its corpora as float32 at start."""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

import aiohttp
import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

from internal.config import Config
from internal.vectord.server import make_app
from lakehouse.wire.modes import MODES
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, unique, unit

C = "/v1/vectors/corpora"
DIM = 16
PRECISIONS = ("float16", "float32")
WORDS = ["heron", "otter", "lynx", "kelp", "ferry", "lagoon"]

COLUMN = """
SELECT format_type(a.atttypid, a.atttypmod) FROM vectord_corpora v
JOIN pg_attribute a ON a.attrelid = to_regclass('vectord_items_' || v.id)
WHERE v.name = %s AND a.attname = 'embedding'"""


async def column_of(pg_dsn: str, name: str) -> str:
    """The SQL type of the corpus's vector column: halfvec(16), vector(16)."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        cur = await conn.execute(COLUMN, (name,))
        row = await cur.fetchone()
    assert row is not None, name
    return str(row[0])


def doc(i: int) -> dict[str, Any]:
    return {"id": f"d{i:04d}", "vector": unit(DIM, i), "title": f"note {i}",
            "text": f"{WORDS[i % 6]} and {WORDS[(i * 5) % 6]} by the river, number {i}",
            "metadata": {"part": i % 3}}


async def corpus(http: aiohttp.ClientSession, url: str, precision: str | None, n: int,
                 **extra: Any) -> str:
    name = unique("prec")
    body: dict[str, Any] = {"name": name, "dim": DIM, "language": "english", **extra}
    if precision is not None:
        body["precision"] = precision
    status, out = await call(http, "POST", f"{url}{C}", body)
    assert status == 201, out
    for start in range(0, n, 500):
        status, out = await call(http, "POST", f"{url}{C}/{name}/items",
                                 {"items": [doc(i) for i in range(start, min(n, start + 500))]})
        assert status == 200, out
    return name


async def test_the_precision_is_chosen_at_creation_kept_and_shown(
        vectord_url: str, http: aiohttp.ClientSession, pg_dsn: str) -> None:
    made = {p: await corpus(http, vectord_url, p, 3) for p in (None, *PRECISIONS)}
    for given, want, column in ((None, "float16", "halfvec"), ("float16", "float16", "halfvec"),
                                ("float32", "float32", "vector")):
        status, out = await call(http, "GET", f"{vectord_url}{C}/{made[given]}")
        assert status == 200 and out["precision"] == want, out
        assert await column_of(pg_dsn, made[given]) == f"{column}({DIM})"
    status, listed = await call(http, "GET", f"{vectord_url}{C}")
    shown = {c["name"]: c["precision"] for c in listed["corpora"]}
    assert shown[made[None]] == "float16" and shown[made["float32"]] == "float32"
    status, out = await call(http, "POST", f"{vectord_url}{C}",
                             {"name": unique("prec"), "dim": DIM, "precision": "float64"})
    assert status == 400 and "precision" in out["error"]["message"], out


async def _answers(http: aiohttp.ClientSession, url: str, name: str) -> dict[str, Any]:
    """Each mode's hits (ids, and the vector mode's distances), and the hits of hybrid
    search with feedback, with diversity, filtered and grouped."""
    q = {"query_vector": unit(DIM, 7), "query_text": "heron river", "k": 8}
    bodies: dict[str, dict[str, Any]] = {m: {**q, "mode": m} for m in MODES}
    bodies["keyword"]["query_text"] = "heron"
    bodies["prf"] = {**q, "mode": "hybrid", "prf": {"docs": 3, "terms": 2}}
    bodies["diversity"] = {**q, "mode": "hybrid", "diversity": 0.5}
    bodies["filtered"] = {**q, "mode": "vector", "filter": {"metadata": {"part": 1}}}
    bodies["grouped"] = {**q, "mode": "hybrid", "group_by": "metadata.part"}
    out: dict[str, Any] = {}
    for key, body in bodies.items():
        status, got = await call(http, "POST", f"{url}{C}/{name}/search", body)
        assert status == 200, (key, got)
        out[key] = [h["id"] for h in got["hits"]]
        if key == "vector":
            out["distances"] = [h["distance"] for h in got["hits"]]
    return out


async def test_every_mode_answers_alike_in_both_precisions(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    names = {p: await corpus(http, vectord_url, p, 300) for p in PRECISIONS}
    got = {p: await _answers(http, vectord_url, names[p]) for p in PRECISIONS}
    for key in got["float32"]:
        if key == "distances":  # float16's vectors are rounded: distances differ a little
            assert np.allclose(got["float16"][key], got["float32"][key], atol=2e-3)
        else:
            assert got["float16"][key] == got["float32"][key] and got["float16"][key], key
    assert got["float16"]["vector"][0] == "d0007"
    # Federated: both precisions in one search, merged by distance.
    status, fed = await call(http, "POST", f"{vectord_url}/v1/vectors/search", {
        "corpora": list(names.values()), "mode": "vector", "query_vector": unit(DIM, 7), "k": 4})
    assert status == 200, fed
    assert {h["id"] for h in fed["hits"][:2]} == {"d0007"}
    assert {h["corpus"] for h in fed["hits"][:2]} == set(names.values())
    # An item reads back as stored: float32 bit for bit, float16 within its rounding.
    for p, tol in (("float32", 1e-7), ("float16", 1e-3)):
        status, item = await call(http, "GET",
                                  f"{vectord_url}{C}/{names[p]}/items/d0042?include=vector")
        assert status == 200 and np.allclose(item["vector"], unit(DIM, 42), atol=tol), item


async def test_an_exact_scan_without_an_index_answers_in_both_precisions(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    """A deferred index: the vector searches scan the table exactly, then the index built."""
    for p in PRECISIONS:
        name = await corpus(http, vectord_url, p, 200, defer_index=True)
        for when in ("scan", "index"):
            status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                                     {"mode": "vector", "query_vector": unit(DIM, 11), "k": 3})
            assert status == 200 and out["hits"][0]["id"] == "d0011", (p, when, out)
            assert abs(out["hits"][0]["distance"]) < 2e-3
            if when == "scan":
                status, built = await call(http, "POST", f"{vectord_url}{C}/{name}/index")
                assert status == 200, built


async def test_convert_refuses_what_it_cannot_do(vectord_url: str,
                                                 http: aiohttp.ClientSession) -> None:
    name = await corpus(http, vectord_url, "float16", 3)
    url = f"{vectord_url}{C}/{name}/convert"
    status, out = await call(http, "POST", url, {"precision": "float16"})
    assert status == 409 and out["error"]["field"] == "precision", out
    status, out = await call(http, "POST", url, {"precision": "float8"})
    assert status == 400, out
    status, out = await call(http, "POST", f"{vectord_url}{C}/nope_{name}/convert",
                             {"precision": "float32"})
    assert status == 404, out


async def test_a_conversion_under_searches_and_writes_switches_once(
        vectord_url: str, http: aiohttp.ClientSession, pg_dsn: str) -> None:
    n = 5000
    name = await corpus(http, vectord_url, "float32", n)
    url = f"{vectord_url}{C}/{name}"
    stop = asyncio.Event()
    failed: list[Any] = []
    searched = 0
    acked: dict[str, list[float]] = {}

    async def searcher(mode: str) -> None:
        nonlocal searched
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                status, out = await call(s, "POST", f"{url}/search", {
                    "mode": mode, "query_vector": unit(DIM, 7), "query_text": "heron", "k": 5})
                if status != 200 or len(out["hits"]) != 5:
                    failed.append((mode, status, out))
                searched += 1

    async def writer() -> None:
        i = 0
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                item_id = f"d{(i * 37) % n:04d}" if i % 2 else f"new{i}"  # changed or new
                vector = unit(DIM, 100_000 + i)
                status, out = await call(s, "POST", f"{url}/items", {"items": [
                    {"id": item_id, "vector": vector, "text": f"written {i} heron"}]})
                if status == 200:
                    acked[item_id] = vector
                else:
                    failed.append(("write", status, out))
                i += 1
                await asyncio.sleep(0.005)

    tasks = [asyncio.create_task(searcher(m)) for m in ("vector", "hybrid")]
    tasks.append(asyncio.create_task(writer()))
    seen: list[str] = []  # the precision each poll saw, and whether a conversion ran
    listed: list[Any] = []
    try:
        await asyncio.sleep(0.3)
        status, started = await call(http, "POST", f"{url}/convert", {"precision": "float16"})
        assert status == 202 and started["precision"] == "float16", started
        assert started["total"] >= n
        for _ in range(1200):
            # The list first (lakehouse status reads it), then the corpus: each poll is two
            # observations in time order, so a conversion ending between them is no race.
            status, every = await call(http, "GET", f"{vectord_url}{C}")
            assert status == 200, every
            (entry,) = [c for c in every["corpora"] if c["name"] == name]
            seen.append(entry["precision"] + ("+" if "conversion" in entry else ""))
            if "conversion" in entry:
                listed.append(entry["conversion"])
            status, out = await call(http, "GET", url)
            assert status == 200, out
            seen.append(out["precision"] + ("+" if "conversion" in out else ""))
            if out["precision"] == "float16" and "conversion" not in out:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # searches and writes on the new table too
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert not failed, failed[:5]
    assert searched > 20
    assert "float32+" in seen and seen[-1] == "float16", seen
    assert listed and listed[0]["precision"] == "float16", listed
    switches = sum(1 for a, b in itertools.pairwise(seen) if a[:7] != b[:7])
    assert switches == 1, seen
    assert await column_of(pg_dsn, name) == f"halfvec({DIM})"
    # Nothing acknowledged is lost, every write's last vector is the one stored.
    status, out = await call(http, "GET", url)
    assert out["count"] == n + sum(1 for i in acked if i.startswith("new"))
    for item_id, vector in list(acked.items())[-30:]:
        status, got = await call(http, "GET", f"{url}/items/{item_id}?include=vector")
        assert status == 200 and np.allclose(got["vector"], vector, atol=1e-3), item_id
    # And back, with nothing running: float32 again, the same answers.
    status, started = await call(http, "POST", f"{url}/convert", {"precision": "float32"})
    assert status == 202, started
    for _ in range(600):
        status, out = await call(http, "GET", url)
        if out["precision"] == "float32" and "conversion" not in out:
            break
        await asyncio.sleep(0.1)
    assert out["precision"] == "float32" and await column_of(pg_dsn, name) == f"vector({DIM})"
    status, hits = await call(http, "POST", f"{url}/search",
                              {"mode": "lexical", "query_text": "written heron", "k": 3})
    assert status == 200 and len(hits["hits"]) == 3, hits


# What a database migrated before precisions existed lacks (schema version 9).
BEFORE_PRECISIONS = """
ALTER TABLE vectord_corpora DROP COLUMN precision;
ALTER TABLE vectord_spaces DROP CONSTRAINT vectord_spaces_key;
ALTER TABLE vectord_spaces DROP COLUMN precision;
ALTER TABLE vectord_spaces ADD CONSTRAINT vectord_spaces_dim_metric_model_key
    UNIQUE (dim, metric, model);
ALTER TABLE vectord_reembed DROP COLUMN kind, DROP COLUMN precision, DROP COLUMN position;
DELETE FROM schema_migrations WHERE component = 'vectord' AND version >= 10"""


async def test_a_database_from_before_precisions_keeps_working_and_converts(
        base_cfg: Config, pg_dsn: str, http: aiohttp.ClientSession) -> None:
    """A data directory whose corpora predate precisions: at start its corpora are float32
    (their `vector` columns), answer as before, and convert online."""
    db = f"before_{os.getpid()}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(f"DROP DATABASE IF EXISTS {db}")
        await conn.execute(f"CREATE DATABASE {db}")
    dsn = make_conninfo(pg_dsn, dbname=db)
    cfg = with_section(base_cfg, "vectord", dsn=dsn, warm_seconds=0.0)
    server = await serve(make_app(cfg))
    name = await corpus(http, url_of(server), "float32", 300)
    await server.close()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(BEFORE_PRECISIONS)
    server = await serve(make_app(cfg))  # migrates it again
    url = url_of(server)
    try:
        status, out = await call(http, "GET", f"{url}{C}/{name}")
        assert status == 200 and out["precision"] == "float32" and out["count"] == 300, out
        before = await _answers(http, url, name)
        assert before["vector"][0] == "d0007"
        status, started = await call(http, "POST", f"{url}{C}/{name}/convert",
                                     {"precision": "float16"})
        assert status == 202, started
        for _ in range(300):
            status, out = await call(http, "GET", f"{url}{C}/{name}")
            if out["precision"] == "float16" and "conversion" not in out:
                break
            await asyncio.sleep(0.1)
        assert await column_of(dsn, name) == f"halfvec({DIM})"
        after = await _answers(http, url, name)
        assert {k: v for k, v in after.items() if k != "distances"} == \
            {k: v for k, v in before.items() if k != "distances"}
    finally:
        await server.close()


async def test_numbers_beyond_float16_are_a_400_or_scaled_where_the_metric_allows(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    """float16 ends at 65504. A cosine corpus's vector is scaled first (its direction is
    all a cosine distance reads); an l2 or ip corpus's is refused, naming the item, the
    number and the limit; a float32 corpus holds it. Never a 500, nothing written."""
    big = [3e38] + [1.0] * (DIM - 1)
    out: dict[str, tuple[int, Any]] = {}
    for metric in ("cosine", "l2", "ip"):
        for precision in PRECISIONS:
            name = await corpus(http, vectord_url, precision, 0, metric=metric)
            status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {
                "items": [{"id": "ok", "vector": unit(DIM, 1), "text": "a note"},
                          {"id": "big", "vector": big, "text": "a large vector"}]})
            search = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                                {"query_vector": big, "k": 2})
            out[f"{metric}/{precision}"] = (status, body)
            _, ids = await call(http, "GET", f"{vectord_url}{C}/{name}/ids")
            if status == 400:
                assert body["error"]["field"] == "items[1].vector", body
                assert "items[1].vector[0]: 3e+38 is beyond float16's range (±65504)" in \
                    body["error"]["message"]
                assert ids["items"] == []  # the whole batch refused
                assert search[0] == 400 and search[1]["error"]["field"] == "query_vector"
            else:
                assert status == 200, (metric, precision, body)
                assert {r["id"] for r in ids["items"]} == {"ok", "big"}
                assert search[0] == 200, search
            if (metric, precision) == ("cosine", "float16"):
                status, item = await call(
                    http, "GET", f"{vectord_url}{C}/{name}/items/big?include=vector")
                v = np.asarray(item["vector"])
                assert v[0] == 1.0 and np.isclose(v[1], 1.0 / 3e38, atol=1e-3)
    assert {k: v[0] for k, v in out.items()} == {
        "cosine/float16": 200, "cosine/float32": 200, "l2/float16": 400, "l2/float32": 200,
        "ip/float16": 400, "ip/float32": 200}
