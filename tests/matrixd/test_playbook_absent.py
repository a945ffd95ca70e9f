"""A playbook corpus that does not exist costs a search no round trip to vectord, and a
record (through this matrixd at once, through another within the absence's time) is
seen by the next search."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from internal.api.vectord import Item
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd import playbook
from internal.matrixd.server import make_app
from tests.helpers import serve, url_of, with_section

PETS = ["Cats are small domesticated felines that people keep as pets.",
        "Parrots can imitate human speech and live for decades."]


class VectordCalls:
    """A pass-through proxy in front of the real vectord that notes each call's path."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.paths: list[str] = []

    def app(self) -> web.Application:
        async def relay(request: web.Request) -> web.Response:
            self.paths.append(request.path)
            headers = {k: v for k, v in request.headers.items()
                       if k.lower() not in ("host", "content-length")}
            async with aiohttp.ClientSession() as s, s.request(
                    request.method, f"{self.target}{request.path_qs}", data=await request.read(),
                    headers=headers) as r:
                return web.Response(status=r.status, body=await r.read(),
                                    content_type=r.content_type)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", relay)
        return app

    def playbook_searches(self, corpus: str) -> int:
        return sum(p == f"/v1/vectors/corpora/{corpus}/search" for p in self.paths)


@pytest.fixture
async def pets(vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    name = f"pets_{uuid.uuid4().hex[:10]}"
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        e = await emb.embed(PETS)
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [Item(id=f"p{i}", vector=v, text=t)
                                for i, (t, v) in enumerate(zip(PETS, e.vectors, strict=True))],
                         model=e.model)
        yield name
        await vec.delete_corpus(name)


async def _search(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with http.post(f"{url}/v1/matrix/search", json=body) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_an_absent_playbook_is_asked_once_then_seen_after_a_record(
        http: aiohttp.ClientSession, base_cfg: Config, vectord_url: str, embedd_url: str,
        pets: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = VectordCalls(vectord_url)
    proxy = await serve(calls.app())
    pb = f"pb_{uuid.uuid4().hex[:10]}"
    servers = [await serve(make_app(with_section(
        base_cfg, "matrixd", vectord_url=url_of(proxy), embedd_url=embedd_url,
        playbook_corpus=pb))) for _ in range(2)]
    this, other = (url_of(s) for s in servers)
    other_pb = f"pb_{uuid.uuid4().hex[:10]}"
    q: dict[str, Any] = {"query_text": "a bird that talks", "mode": "vector", "corpora": [pets], "k": 2,
         "use_playbook": True}
    try:
        for _ in range(3):
            out = await _search(http, this, q)
            assert out["playbook"]["entries"] == 0
        assert calls.playbook_searches(pb) == 1  # the 404 is remembered

        # A record through this matrixd is seen by its next search at once.
        async with http.post(f"{this}/v1/matrix/playbooks/record", json={
                "query_text": q["query_text"], "answer_id": "p0", "answer_corpus": pets,
                "score": 1.0}) as r:
            assert r.status == 200, await r.text()
        out = await _search(http, this, q)
        assert out["playbook"]["entries"] == 1 and out["playbook_boosted"] == 1
        assert out["hits"][0]["id"] == "p0"

        # Another matrixd that found no playbook before the record sees it once its
        # absence expires (ABSENT_TTL_SECONDS; shortened here).
        q_other = {**q, "playbook_corpus": other_pb}
        assert (await _search(http, other, q_other))["playbook"]["entries"] == 0
        async with http.post(f"{this}/v1/matrix/playbooks/record", json={
                "query_text": q["query_text"], "answer_id": "p0", "answer_corpus": pets,
                "score": 1.0, "playbook_corpus": other_pb}) as r:
            assert r.status == 200, await r.text()
        assert (await _search(http, other, q_other))["playbook"]["entries"] == 0  # remembered
        monkeypatch.setattr(playbook, "ABSENT_TTL_SECONDS", 0.0)
        assert (await _search(http, other, q_other))["playbook"]["entries"] == 1
    finally:
        async with aiohttp.ClientSession() as s:
            vec = VectordClient(s, vectord_url)
            for name in (pb, other_pb):
                await vec.delete_corpus(name)
        for server in servers:
            await server.close()
        await proxy.close()
