"""matrixd passes the fusion options through to vectord."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.server import make_app
from tests.helpers import serve, url_of, with_section

TEXTS = {
    "cat": "Cats are small domesticated felines that people keep as pets.",
    "dog": "Dogs are loyal companions and were domesticated from wolves.",
    "moon": "The Moon orbits the Earth roughly every twenty-seven days.",
}


@pytest.fixture
async def matrix(base_cfg: Config, vectord_url: str, embedd_url: str,
                 http: aiohttp.ClientSession) -> AsyncIterator[tuple[str, str]]:
    name = f"mxf_{uuid.uuid4().hex[:10]}"
    emb = await EmbedClient(http, embedd_url).embed(list(TEXTS.values()))
    vc = VectordClient(http, vectord_url)
    await vc.create_corpus(name, emb.dim, language="english", model=emb.model)
    await vc.upsert(name, [{"id": i, "vector": v, "text": t,
                            "metadata": {"type": "pet" if i != "moon" else "space"}}
                           for (i, t), v in zip(TEXTS.items(), emb.vectors, strict=True)],
                    model=emb.model)
    cfg = with_section(base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=embedd_url)
    server = await serve(make_app(cfg))
    yield url_of(server), name
    await server.close()


async def test_fusion_options_reach_vectord(matrix: tuple[str, str],
                                            http: aiohttp.ClientSession) -> None:
    url, name = matrix
    body = {"corpora": [name], "query_text": "pets that live with people", "mode": "hybrid",
            "fusion": "weighted", "weights": {"vector": 0.2, "lexical": 0.2, "symbolic": 0.6},
            "prefer": {"type": "space"}}
    async with http.post(f"{url}/v1/matrix/search", json=body) as resp:
        out = await resp.json()
    assert resp.status == 200, out
    top = out["hits"][0]
    assert top["id"] == "moon" and "symbolic" in top["matched_layers"]
    assert top["scores"]["symbolic"] == 1.0
    async with http.post(f"{url}/v1/matrix/search", json={**body, "fusion": "borda"}) as resp:
        err = await resp.json()
    assert resp.status == 400 and err["error"]["field"] == "fusion"


async def test_prf_reaches_vectord(matrix: tuple[str, str], http: aiohttp.ClientSession) -> None:
    url, name = matrix
    body = {"corpora": [name], "query_text": "pets that live with people", "mode": "hybrid"}
    async with http.post(f"{url}/v1/matrix/search", json={**body, "prf": {"docs": 0}}) as resp:
        plain = await resp.json()
    async with http.post(f"{url}/v1/matrix/search", json=body) as resp:
        default = await resp.json()
    assert resp.status == 200, default
    assert [h["id"] for h in plain["hits"]] == [h["id"] for h in default["hits"]]
    async with http.post(f"{url}/v1/matrix/search",
                         json={**body, "prf": {"docs": 2, "terms": 5, "weight": 0.5}}) as resp:
        fed = await resp.json()
    assert resp.status == 200, fed
    async with http.post(f"{url}/v1/matrix/search", json={**body, "prf": {"docs": -1}}) as resp:
        err = await resp.json()
    assert resp.status == 400 and err["error"]["field"] == "prf.docs", err
