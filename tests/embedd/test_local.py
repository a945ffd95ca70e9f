"""embedd with the real local model (all-MiniLM-L6-v2 int8), through the HTTP API."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp.test_utils import TestServer

from internal.config import Config
from internal.embedd.catalog import E5_ID, E5_LANGUAGES
from internal.embedd.local import MAX_TOKENS, LocalModel, tokenizer_path
from internal.embedd.server import SERVICE, make_app
from tests.helpers import require_shared, serve, url_of, with_section

MODEL_DIR = ("models", "all-minilm-l6-v2")


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[TestServer]:
    # batch_size 4 (the default, 1, was fastest here) so the tests exercise coalescing.
    cfg = with_section(Config(), "embedd", cache_size=1000, max_texts=256, batch_size=4,
                       max_wait_ms=2.0)
    srv = await serve(make_app(cfg))
    yield srv
    await srv.close()


@pytest.fixture(scope="module")
def model() -> LocalModel:
    """The same model called in-process, with no cache and no coalescing."""
    return LocalModel()


async def embed(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(f"{url}/v1/embed", json=body) as resp:
        return resp.status, await resp.json()


def unique(text: str) -> str:
    """A text the cache has never seen."""
    return f"{text} [{uuid.uuid4().hex[:8]}]"


async def test_matches_sentence_transformers_reference(
        server: TestServer, http: aiohttp.ClientSession) -> None:
    texts = json.loads(require_shared(*MODEL_DIR, "reference_texts.json").read_text())["texts"]
    ref = np.load(require_shared(*MODEL_DIR, "ref_st.npy"))
    status, out = await embed(http, url_of(server), {"texts": texts})
    assert status == 200, out
    assert out["model"] == "all-MiniLM-L6-v2-int8" and out["dim"] == 384
    got = np.asarray(out["vectors"], dtype=np.float64)
    assert got.shape == (251, 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * ref).sum(axis=1) / np.linalg.norm(ref, axis=1)
    worst = int(np.argmin(cos))
    # The integer numerics (the default; the activations quantized to 8 bits, a few
    # outlier channels in float) stay near the fp32 original: 0.9989 at the mean, 0.9949
    # at worst. (Products that saturate, int8 weights on x86 without VNNI: 0.9955, 0.9526.)
    assert cos.mean() >= 0.998, f"mean cosine {cos.mean():.4f}"
    assert cos.min() >= 0.99, f"text {worst} {texts[worst][:60]!r}: cosine {cos[worst]:.4f}"
    # The two texts longer than 256 word pieces, and only they, are reported as cut.
    assert out["truncated"] == [45, 46]


async def test_long_texts_are_truncated_not_rejected(
        server: TestServer, http: aiohttp.ClientSession) -> None:
    just_fits = unique("word " * (MAX_TOKENS - 20))
    too_long = unique("word " * (MAX_TOKENS * 2))
    status, out = await embed(http, url_of(server), {"texts": [just_fits, too_long, "short"]})
    assert status == 200
    assert out["truncated"] == [1]


async def test_paraphrase_is_nearer_than_unrelated(
        server: TestServer, http: aiohttp.ClientSession) -> None:
    texts = ["How do I reset my password?",
             "I forgot my password and need to change it.",
             "The stock market fell sharply on Tuesday."]
    status, out = await embed(http, url_of(server), {"texts": texts, "input_type": "query"})
    assert status == 200
    v = np.asarray(out["vectors"])
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


async def test_concurrent_requests_get_their_own_vectors_in_order(
        server: TestServer, http: aiohttp.ClientSession, model: LocalModel) -> None:
    # 50 requests of 3 distinct texts each, of varied lengths so coalesced batches mix them.
    topics = ["the ocean", "tax law", "a violin", "mountain trails", "quantum computing"]
    bodies = [[unique(f"request {r} item {i}: a note about {topics[(r + i) % 5]}" + " and more" * (r % 7))
               for i in range(3)] for r in range(50)]
    service = server.app[SERVICE]
    local = service.default
    calls_before = local.coalescer.calls  # type: ignore[attr-defined]
    results = await asyncio.gather(*(embed(http, url_of(server), {"texts": b}) for b in bodies))
    calls = local.coalescer.calls - calls_before  # type: ignore[attr-defined]
    assert calls < 150, "texts of concurrent requests were never coalesced"
    for texts, (status, out) in zip(bodies, results, strict=True):
        assert status == 200
        got = np.asarray(out["vectors"])
        want = model.embed(texts).vectors
        # Batch composition moves int8 activations a little; identity must not move.
        assert np.all((got * want).sum(axis=1) > 0.999)
        assert [int(np.argmax(want @ g)) for g in got] == [0, 1, 2]


async def test_cached_text_returns_identical_vector(
        server: TestServer, http: aiohttp.ClientSession) -> None:
    text = unique("Caching returns exactly what the model said the first time.")
    cache = server.app[SERVICE].cache
    _, first = await embed(http, url_of(server), {"texts": [text]})
    hits = cache.hits
    _, again = await embed(http, url_of(server), {"texts": ["other words entirely", text, text]})
    assert again["vectors"][1] == first["vectors"][0]
    assert again["vectors"][2] == first["vectors"][0]
    assert cache.hits >= hits + 2


async def test_healthz_answers_during_a_long_batch(
        server: TestServer, http: aiohttp.ClientSession) -> None:
    texts = [unique("A long passage about retrieval systems and their evaluation. " * 20)
             for _ in range(64)]
    big = asyncio.create_task(embed(http, url_of(server), {"texts": texts}))
    await asyncio.sleep(0.3)  # let the batch reach the model
    async with http.get(f"{url_of(server)}/healthz") as resp:
        assert resp.status == 200
        assert (await resp.json()) == {"status": "ok"}
    assert not big.done(), "the batch finished before /healthz was asked; make it longer"
    status, out = await big
    assert status == 200 and len(out["vectors"]) == 64


async def test_limits_and_errors(server: TestServer, http: aiohttp.ClientSession) -> None:
    url = url_of(server)
    status, out = await embed(http, url, {"texts": ["x"] * 257})
    assert status == 413 and out["error"]["code"] == "payload_too_large"
    assert "256" in out["error"]["message"]

    status, out = await embed(http, url, {"texts": ["fine", "also fine", "  \n\t"]})
    assert status == 400 and out["error"]["field"] == "texts[2]"

    status, out = await embed(http, url, {"texts": ["x"], "model": "gpt-9"})
    assert status == 400 and out["error"]["field"] == "model"
    assert "all-MiniLM-L6-v2-int8, all-MiniLM-L6-v2" in out["error"]["message"]

    status, out = await embed(http, url, {"texts": ["x"], "input_type": "passage"})
    assert status == 400 and out["error"]["field"] == "input_type"

    status, out = await embed(http, url, {"texts": ["x"], "extra": 1})
    assert status == 400 and out["error"]["field"] == "extra"

    status, out = await embed(http, url, {"texts": []})
    assert status == 200 and out["vectors"] == [] and out["dim"] == 384

    status, out = await embed(http, url, {"texts": ["x"], "model": "local"})
    assert status == 200 and out["model"] == "all-MiniLM-L6-v2-int8"


async def test_models_and_readyz(server: TestServer, http: aiohttp.ClientSession) -> None:
    """The integer numerics are the default; the float numerics (the id data embedded
    before holds) are served too, listed as superseded by them; then the multilingual
    model. Each with the languages it declares."""
    async with http.get(f"{url_of(server)}/v1/embed/models") as resp:
        assert await resp.json() == {
            "default": "all-MiniLM-L6-v2-int8",
            "models": [{"id": "all-MiniLM-L6-v2-int8", "backend": "local", "dim": 384,
                        "languages": ["en"]},
                       {"id": "all-MiniLM-L6-v2", "backend": "local", "dim": 384,
                        "superseded_by": "all-MiniLM-L6-v2-int8", "languages": ["en"]},
                       {"id": E5_ID, "backend": "local", "dim": 384,
                        "languages": list(E5_LANGUAGES)}]}
    async with http.get(f"{url_of(server)}/readyz") as resp:
        assert resp.status == 200 and (await resp.json())["status"] == "ok"


def test_tokenizer_ships_as_package_data() -> None:
    path = tokenizer_path()
    assert path.is_file() and "internal" in path.parts and path.parent.name == "data"


async def test_client_library(server: TestServer, http: aiohttp.ClientSession) -> None:
    from internal.clients.embed import make_client

    assert make_client(http, None) is None and make_client(http, "") is None
    client = make_client(http, url_of(server))
    assert client is not None
    out = await client.embed(["first text", "second text"], input_type="query")
    assert out.model == "all-MiniLM-L6-v2-int8" and out.dim == 384 and len(out.vectors) == 2
    assert out.truncated == []
    models = await client.models()
    assert models.default == "all-MiniLM-L6-v2-int8"
    assert await client.superseded() == {"all-MiniLM-L6-v2": "all-MiniLM-L6-v2-int8"}
