"""A data directory embedded by the old numerics meets a stack of the new.

The local model's integer numerics are a model id of their own (`all-MiniLM-L6-v2-int8`;
the float numerics, what a data directory made before holds, keep `all-MiniLM-L6-v2`:
docs/decisions/0034-integer-model-id.md). embedd serves both and lists the old as
superseded; a vectord that starts moves each corpus of the old id to the new, online, by
the re-embedding job (its state in PostgreSQL). Meanwhile every search answers (matrixd
embeds the question by the model each corpus records), writes of the old id reach both
vectors, a write labelled with the other id is refused (no mix), and the progress shows in
the corpus, the listing and `lakehouse status`. Corpora of the new id, of no id or of
other models are never moved: a new stack re-embeds nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec
import numpy as np
import pytest
from aiohttp import web

from internal.cli.stack_cmd import reembed_lines
from internal.config import Config
from internal.embedd.local import LocalModel
from internal.matrixd.server import make_app as make_matrixd
from internal.vectord.server import REEMBED
from internal.vectord.server import make_app as make_vectord
from lakehouse.types import Corpus
from tests.helpers import require_shared, serve, url_of, with_section
from tests.vectord.vdata import call, unique

C = "/v1/vectors/corpora"
OLD, NEW = "all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"
DOCS = 160


@dataclass
class Upgrade:
    docs: list[dict[str, Any]]
    old: str  # the corpus written by the old numerics
    fresh: str  # a corpus of the new id
    bare: str  # a corpus of no id (vectors of the caller's own)
    float_model: LocalModel
    integer_model: LocalModel


async def write(http: aiohttp.ClientSession, vectord: str, name: str,
                items: list[dict[str, Any]], model: str | None) -> tuple[int, Any]:
    return await call(http, "POST", f"{vectord}{C}/{name}/items",
                      {"items": items, "model": model})


@pytest.fixture(scope="module")
async def before(vectord_url: str, embedd_url: str) -> AsyncIterator[Upgrade]:
    """The data directory as the old numerics left it (written through a vectord with no
    embedd, so nothing moves yet), and two corpora that must never move."""
    lines = require_shared("data", "cranfield", "corpus.jsonl").read_text().splitlines()
    docs = [d for d in map(json.loads, lines[:DOCS + 40]) if d.get("title", "").strip()][:DOCS]
    float_model, integer_model = LocalModel(1, "float"), LocalModel(1, "integer")
    vectors = (await asyncio.to_thread(
        float_model.embed, [f"{d['title']}\n{d['text']}" for d in docs])).vectors
    up = Upgrade(docs, unique("old"), unique("fresh"), unique("bare"), float_model,
                 integer_model)
    async with aiohttp.ClientSession() as http:
        for name, dim, model in ((up.old, 384, OLD), (up.fresh, 384, NEW), (up.bare, 3, None)):
            status, body = await call(http, "POST", f"{vectord_url}{C}",
                                      {"name": name, "dim": dim, "model": model})
            assert status == 201, body
        status, body = await write(http, vectord_url, up.old, [
            {"id": d["_id"], "vector": [float(x) for x in v], "title": d["title"],
             "text": d["text"]} for d, v in zip(docs, vectors, strict=True)], OLD)
        assert status == 200, body
        async with http.post(f"{embedd_url}/v1/embed", json={"texts": ["a fresh note"]}) as r:
            fresh = await r.json()
        assert fresh["model"] == NEW
        assert (await write(http, vectord_url, up.fresh, [
            {"id": "f", "vector": fresh["vectors"][0], "text": "a fresh note"}], NEW))[0] == 200
        assert (await write(http, vectord_url, up.bare, [
            {"id": "b", "vector": [1.0, 0.0, 0.5], "text": "a bare note"}], None))[0] == 200
        yield up
        for name in (up.old, up.fresh, up.bare):
            await call(http, "DELETE", f"{vectord_url}{C}/{name}")


async def started(app: web.Application) -> tuple[web.Application, str, Any]:
    server = await serve(app)
    await asyncio.wait_for(app[REEMBED].checked.wait(), 60)  # its first look is done
    return app, url_of(server), server


async def test_the_stack_moves_old_corpora_online(
        before: Upgrade, base_cfg: Config, embedd_url: str, http: aiohttp.ClientSession) -> None:
    up = before
    cfg = with_section(base_cfg, "vectord", embedd_url=(embedd_url,))
    app, vectord, server = await started(make_vectord(cfg))
    matrixd = await serve(make_matrixd(with_section(
        base_cfg, "matrixd", vectord_url=vectord, embedd_url=embedd_url,
        playbook_corpus=unique("pb"))))
    url = f"{vectord}{C}/{up.old}"
    stop = asyncio.Event()
    searches: list[tuple[int, bool, bool]] = []  # status, its document found, corpus skipped
    written: dict[str, str] = {}  # id -> text, acknowledged with the old id's vectors
    refused: list[tuple[int, Any]] = []  # the new id's vectors while the corpus is old

    async def searcher() -> None:
        i = 0
        while not stop.is_set():
            doc = up.docs[i % len(up.docs)]
            status, body = await call(http, "POST", f"{url_of(matrixd)}/v1/matrix/search",
                                      {"query_text": doc["title"], "corpora": [up.old], "k": 5})
            searches.append((status, status == 200 and doc["_id"] in
                             [h["id"] for h in body["hits"]],
                             status == 200 and bool(body["skipped_corpora"])))
            i += 1

    async def writer() -> None:
        i = 0
        while not stop.is_set():
            text = f"written during the move: note {i} about ferries, lagoons and kelp"
            old_v = (await asyncio.to_thread(up.float_model.embed, [text])).vectors[0]
            status, body = await write(http, vectord, up.old, [
                {"id": f"w{i}", "vector": [float(x) for x in old_v], "text": text}], OLD)
            if status == 200:
                written[f"w{i}"] = text
            else:  # switched between: the old id's vectors are refused from then on
                assert status == 409 and body["error"]["code"] == "model_mismatch", body
            new_v = (await asyncio.to_thread(up.integer_model.embed, [text])).vectors[0]
            status, body = await write(http, vectord, up.old, [
                {"id": f"n{i}", "vector": [float(x) for x in new_v], "text": text}], NEW)
            if status != 200:
                refused.append((status, body))
            i += 1

    progress: list[dict[str, Any]] = []
    status_rows: list[tuple[str, str, str]] = []
    tasks = [asyncio.create_task(searcher()), asyncio.create_task(writer())]
    try:
        assert up.old in app[REEMBED].moved
        # A second vectord starting meanwhile begins nothing: the job exists.
        second_app, _, second = await started(make_vectord(cfg))
        await second.close()
        assert second_app[REEMBED].moved == []
        for _ in range(1200):
            status, corpus = await call(http, "GET", url)
            assert status == 200, corpus
            if corpus["model"] == NEW:
                break
            if "reembed" in corpus:
                progress.append(corpus["reembed"])
                status, listing = await call(http, "GET", f"{vectord}{C}")
                rows, _ = reembed_lines(msgspec.convert(listing["corpora"], list[Corpus]))
                status_rows += [r for r in rows if f"corpus {up.old}:" in r[2]]
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # searches and writes on the new vectors too
        stop.set()
        await asyncio.gather(*tasks)

        status, corpus = await call(http, "GET", url)
        assert corpus["model"] == NEW and corpus["dim"] == 384 and "reembed" not in corpus
        # The progress was visible: the corpus, the listing, `lakehouse status`'s rows.
        assert progress and all(p["model"] == NEW and p["total"] >= DOCS for p in progress)
        assert status_rows and status_rows[0][:2] == ("reembed", "running"), status_rows
        assert f"{OLD} -> {NEW}" in status_rows[0][2], status_rows
        # Searches answered throughout, the corpus's vectors searched (never skipped),
        # and each title found its document (as before the move, and after it).
        assert searches and all(s == 200 for s, _, _ in searches), searches[:5]
        assert not any(skipped for _, _, skipped in searches)
        assert sum(found for _, found, _ in searches) >= 0.9 * len(searches)
        # The new id's vectors were refused while the corpus held the old: no mix.
        assert refused and all(s == 409 and b["error"]["code"] == "model_mismatch"
                               for s, b in refused)
        # Every item, written before or during the move, holds the new numerics' vector
        # of its current text (writes during the move reached both vectors).
        assert written, "no write landed during the move"
        texts = {d["_id"]: f"{d['title']}\n{d['text']}" for d in up.docs[:20]}
        texts.update(dict(list(written.items())[:20]))
        for item_id, text in texts.items():
            status, item = await call(http, "GET", f"{url}/items/{item_id}")
            assert status == 200, item
            want = up.integer_model.embed([text]).vectors[0]
            assert float(np.dot(item["vector"], want)) > 0.9999, item_id
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await matrixd.close()
        await server.close()


async def test_a_new_stack_moves_nothing(before: Upgrade, base_cfg: Config, embedd_url: str,
                                         http: aiohttp.ClientSession) -> None:
    """Corpora of the new id, of no id (and every other test's) are left as they are."""
    cfg = with_section(base_cfg, "vectord", embedd_url=(embedd_url,))
    app, vectord, server = await started(make_vectord(cfg))
    try:
        assert set(app[REEMBED].moved) <= {before.old}, app[REEMBED].moved
        for name, model in ((before.fresh, NEW), (before.bare, None)):
            status, corpus = await call(http, "GET", f"{vectord}{C}/{name}")
            assert status == 200 and corpus["model"] == model and "reembed" not in corpus
    finally:
        await server.close()


async def test_embedd_serves_the_old_id_with_the_old_numerics(
        before: Upgrade, embedd_url: str, http: aiohttp.ClientSession) -> None:
    """A question for a corpus not moved yet is embedded as its documents were."""
    text = "heat transfer in a laminar boundary layer"
    for model, local in ((OLD, before.float_model), (NEW, before.integer_model)):
        async with http.post(f"{embedd_url}/v1/embed",
                             json={"texts": [text], "model": model, "input_type": "query"}) as r:
            out = await r.json()
        assert out["model"] == model
        np.testing.assert_allclose(out["vectors"][0], local.embed([text]).vectors[0], atol=1e-5)
