"""Moving a corpus to another embedding model without downtime (internal.vectord.storage.reembed).

Real vectord (embedded PostgreSQL) and embedd with the real local model; the second
model is embedd's Ollama backend against a fake speaking Ollama's wire format. Four
writers and a searcher run through the re-embedding: nothing acknowledged is lost,
every item ends with the new model's vector of its current text, searches answer
throughout (old vectors until the switch, new after), and bad requests are 4xx.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np
import pytest

from internal.config import Config
from internal.embedd.server import make_app as make_embedd
from internal.vectord.server import make_app as make_vectord
from tests.embedd.test_remote import Fake, fake_vector
from tests.helpers import serve, url_of, with_section
from tests.vectord.test_layout import layout_of
from tests.vectord.test_precision import column_of
from tests.vectord.vdata import call, unique, unit

C = "/v1/vectors/corpora"
NEW = "nomic-embed-text"


@dataclass
class Env:
    vectord: str
    embedd: str
    fake: Fake


@pytest.fixture(scope="module")
async def env(base_cfg: Config) -> AsyncIterator[Env]:
    fake = Fake(768)
    fake_srv = await serve(fake.app())
    embedd = await serve(make_embedd(with_section(
        base_cfg, "embedd", backends=("ollama",), ollama_host=url_of(fake_srv),
        timeout_seconds=10.0)))
    vectord = await serve(make_vectord(with_section(base_cfg, "vectord",
                                                    embedd_url=(url_of(embedd),))))
    yield Env(url_of(vectord), url_of(embedd), fake)
    fake.release.set()
    await vectord.close()
    await embedd.close()
    await fake_srv.close()


def expected(text: str) -> np.ndarray:
    """The vector embedd makes of a stored text with the fake model (prefixed, unit)."""
    v = np.asarray(fake_vector(f"search_document: {text}", 768))
    return v / np.linalg.norm(v)


async def local_corpus(http: aiohttp.ClientSession, env: Env, n: int,
                       precision: str = "float16") -> tuple[str, str]:
    texts = [f"note {i} about ferries, lagoons and kelp number {i}" for i in range(n)]
    e: dict[str, Any] = {"vectors": []}
    for start in range(0, n, 200):
        status, part = await call(http, "POST", f"{env.embedd}/v1/embed",
                                  {"texts": texts[start:start + 200]})
        assert status == 200, part
        e = {**part, "vectors": e["vectors"] + part["vectors"]}
    name = unique("re")
    status, out = await call(http, "POST", f"{env.vectord}{C}",
                             {"name": name, "dim": e["dim"], "model": e["model"],
                              "precision": precision})
    assert status == 201, out
    status, out = await call(http, "POST", f"{env.vectord}{C}/{name}/items", {
        "items": [{"id": f"d{i}", "vector": v, "text": t}
                  for i, (t, v) in enumerate(zip(texts, e["vectors"], strict=True))],
        "model": e["model"]})
    assert status == 200, out
    return name, str(e["model"])


async def test_bad_requests_are_4xx(http: aiohttp.ClientSession, env: Env) -> None:
    name, local = await local_corpus(http, env, 3)
    url = f"{env.vectord}{C}/{name}/reembed"
    status, body = await call(http, "POST", url, {"model": "no-such-model"})
    assert status == 400 and body["error"]["field"] == "model", body
    status, body = await call(http, "POST", url, {"model": local})
    assert status == 409 and body["error"]["field"] == "model", body
    status, body = await call(http, "POST", url, {"model": "  "})
    assert status == 400 and body["error"]["field"] == "model", body
    status, body = await call(http, "POST", url, {"model": NEW, "extra": 1})
    assert status == 400, body
    status, body = await call(http, "POST", f"{env.vectord}{C}/nope_{name}/reembed",
                              {"model": NEW})
    assert status == 404, body


async def test_reembed_under_writers_and_searches(http: aiohttp.ClientSession,
                                                  env: Env, pg_dsn: str) -> None:
    name, _ = await local_corpus(http, env, 300)
    texts: dict[str, str] = {f"d{i}": f"note {i} about ferries, lagoons and kelp number {i}"
                             for i in range(300)}
    url = f"{env.vectord}{C}/{name}"
    status, body = await call(http, "POST", f"{url}/reembed", {"model": NEW})
    assert status == 202, body
    assert body["model"] == NEW and body["dim"] == 768 and body["total"] == 300
    status, again = await call(http, "POST", f"{url}/reembed", {"model": NEW})
    assert status == 409 and again["error"]["code"] == "reembed_running", again

    stop = asyncio.Event()
    acked: dict[str, tuple[str, list[float] | None]] = {}  # text; the vector if given after
    errors: list[Any] = []
    search_statuses: list[int] = []

    async def writer(w: int) -> None:
        i = 0
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                status, corpus = await call(s, "GET", url)
                dim = int(corpus["dim"])
                item_id = f"w{w}-{i}" if i % 3 else f"d{(w * 37 + i) % 300}"  # new or changed
                text = f"writer {w} wrote {i} about the Vintermere pier"
                vector = unit(dim, 1000 * w + i)
                status, out = await call(s, "POST", f"{url}/items", {
                    "items": [{"id": item_id, "vector": vector, "text": text}]})
                if status == 200:
                    # Written before the switch: its new vector is made from its text;
                    # after it, the caller's vector is the new model's already.
                    acked[item_id] = (text, vector if dim == 768 else None)
                elif status != 400:  # 400: the dimension switched between GET and POST
                    errors.append((status, out))
                i += 1
                await asyncio.sleep(0.01)

    async def searcher() -> None:
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                for dim in (384, 768):
                    status, out = await call(s, "POST", f"{url}/search",
                                             {"mode": "vector", "query_vector": unit(dim, 5),
                                              "k": 5})
                    search_statuses.append(status)
                    if status == 200:
                        assert len(out["hits"]) == 5
                    elif status != 400:  # the other dimension than the corpus's now
                        errors.append((status, out))
                await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(writer(w)) for w in range(4)]
    tasks.append(asyncio.create_task(searcher()))
    seen_progress = False
    try:
        for _ in range(600):
            status, corpus = await call(http, "GET", url)
            assert status == 200, corpus
            if "reembed" in corpus:
                seen_progress = True
                assert corpus["reembed"]["model"] == NEW
            elif corpus["model"] == NEW:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # writes and searches on the new vectors too
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert not errors, errors[:5]
    assert seen_progress
    status, corpus = await call(http, "GET", url)
    assert corpus["model"] == NEW and corpus["dim"] == 768 and "reembed" not in corpus
    assert 200 in search_statuses
    # Nothing acknowledged is lost, and every item holds the new model's vector of its
    # current text (writes during the re-embedding reached both vectors).
    final: dict[str, tuple[str, list[float] | None]] = {i: (t, None) for i, t in texts.items()}
    final.update(acked)
    assert corpus["count"] == len(final)
    assert any(v is None for _, v in acked.values())  # writes during the re-embedding
    for item_id, (text, given) in final.items():
        status, item = await call(http, "GET", f"{url}/items/{item_id}?include=vector")
        assert status == 200, item
        assert item["text"] == text
        want = expected(text) if given is None else np.asarray(given)
        assert np.allclose(item["vector"], want, atol=1e-4), item_id
    # Searches now use the new vectors.
    status, out = await call(http, "POST", f"{url}/search",
                             {"mode": "vector", "query_vector": expected(texts["d7"]).tolist(),
                              "k": 1})
    assert status == 200 and out["hits"][0]["id"] == "d7", out
    # The new vectors are kept in the row as the old ones were (schema.layout_sql).
    assert (await layout_of(pg_dsn, name))[:2] == ("m", "e")


async def test_deleting_a_corpus_mid_reembed_cancels_it(http: aiohttp.ClientSession,
                                                        env: Env) -> None:
    name, _ = await local_corpus(http, env, 100)
    url = f"{env.vectord}{C}/{name}"
    status, body = await call(http, "POST", f"{url}/reembed", {"model": NEW})
    assert status == 202, body
    env.fake.mode = "slow"  # the job's next batch waits
    try:
        status, body = await call(http, "DELETE", url)
        assert status == 200, body
        status, body = await call(http, "GET", url)
        assert status == 404, body
    finally:
        env.fake.mode = "ok"
        env.fake.release.set()
    status, body = await call(http, "POST", f"{url}/reembed", {"model": NEW})
    assert status == 404, body


async def test_deleting_a_corpus_at_any_moment_of_a_reembed_succeeds(
        http: aiohttp.ClientSession, env: Env) -> None:
    """A delete that meets the re-embedding's index build (CREATE INDEX CONCURRENTLY waits
    for the delete's transaction, the DROP for the build's lock: a deadlock PostgreSQL
    breaks by failing one) is never the caller's 503: vectord deletes again. The moment is
    a matter of timing (first seen in the contract test's run); 30 deletes, 10 ms apart
    into the job, cross every phase of this small corpus's re-embedding."""
    for delay_ms in range(0, 300, 10):
        name, _ = await local_corpus(http, env, 30)
        url = f"{env.vectord}{C}/{name}"
        status, body = await call(http, "POST", f"{url}/reembed", {"model": NEW})
        assert status == 202, body
        await asyncio.sleep(delay_ms / 1000)
        status, body = await call(http, "DELETE", url)
        assert status == 200, (delay_ms, body)
        status, body = await call(http, "GET", url)
        assert status == 404, (delay_ms, body)


async def test_a_reembed_goes_on_after_its_vectord_stops(
        base_cfg: Config, http: aiohttp.ClientSession, env: Env) -> None:
    """The job's state is in PostgreSQL: stopped half-way (its vectord gone, the model
    failing meanwhile), it is taken up again by a vectord that starts, and switches."""
    name, _ = await local_corpus(http, env, 600)
    first = await serve(make_vectord(with_section(base_cfg, "vectord",
                                                  embedd_url=(env.embedd,))))
    try:
        status, body = await call(http, "POST", f"{url_of(first)}{C}/{name}/reembed",
                                  {"model": NEW})
        assert status == 202, body
        env.fake.mode = "error"  # the next batch fails: the job lets go
        for _ in range(100):
            status, corpus = await call(http, "GET", f"{url_of(first)}{C}/{name}")
            if corpus.get("reembed", {}).get("error"):
                break
            await asyncio.sleep(0.05)
        assert corpus["reembed"]["done"] < corpus["reembed"]["total"], corpus
    finally:
        await first.close()
    env.fake.mode = "ok"
    second = await serve(make_vectord(with_section(base_cfg, "vectord",
                                                   embedd_url=(env.embedd,))))
    try:
        url = f"{url_of(second)}{C}/{name}"
        for _ in range(400):
            status, corpus = await call(http, "GET", url)
            if corpus["model"] == NEW:
                break
            await asyncio.sleep(0.1)
        assert corpus["model"] == NEW and corpus["dim"] == 768 and corpus["count"] == 600
        status, item = await call(http, "GET", f"{url}/items/d17?include=vector")
        assert np.allclose(item["vector"], expected(item["text"]), atol=1e-4)
    finally:
        await second.close()


@pytest.mark.parametrize("precision", ["float16", "float32"])
async def test_a_reembedding_keeps_the_corpus_precision(http: aiohttp.ClientSession, env: Env,
                                                        pg_dsn: str, precision: str) -> None:
    """The new vectors and their graph are in the corpus's precision, searched after it."""
    name, _ = await local_corpus(http, env, 40, precision)
    url = f"{env.vectord}{C}/{name}"
    status, body = await call(http, "POST", f"{url}/reembed", {"model": NEW})
    assert status == 202, body
    for _ in range(300):
        status, corpus = await call(http, "GET", url)
        if corpus["model"] == NEW and "reembed" not in corpus:
            break
        await asyncio.sleep(0.1)
    assert corpus["model"] == NEW and corpus["precision"] == precision, corpus
    column = "halfvec" if precision == "float16" else "vector"
    assert await column_of(pg_dsn, name) == f"{column}(768)"
    text = "note 7 about ferries, lagoons and kelp number 7"
    status, out = await call(http, "POST", f"{url}/search",
                             {"mode": "vector", "query_vector": expected(text).tolist(), "k": 1})
    assert status == 200 and out["hits"][0]["id"] == "d7", out
