"""The wire contract, from real answers: every route the gateway's table gives a
response struct (internal.gateway.routes.ROUTES) for embedd, vectord and matrixd is
called on the real daemons (embedded PostgreSQL, the local model, in-process), every
search mode included, and each answer is decoded strictly into that struct: a field the
struct lacks, a missing one or a wrong type fails. Error answers decode into ErrorBody.
syncd (a wiki folder) and mcpd (JSON-RPC) are covered by their own tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.api.responses import ErrorBody
from internal.config import Config
from internal.gateway.routes import ROUTES, Route
from internal.matrixd.server import make_app
from internal.vectord.server import make_app as vectord_app
from lakehouse.wire.modes import MODES
from tests.helpers import serve, url_of, with_section
from tests.wire_drift import strictly

DAEMONS = ("embedd", "vectord", "matrixd")
TEXTS = [
    "Cats are small domesticated felines that people keep as pets.",
    "Dogs are loyal companions and were domesticated from wolves.",
    "The Moon orbits the Earth roughly every twenty-seven days.",
    "Jupiter is the largest planet in the Solar System.",
]


class Contract:
    """Calls routes of the table on the daemons, decoding each answer strictly."""

    def __init__(self, http: aiohttp.ClientSession, urls: dict[str, str]) -> None:
        self.http = http
        self.urls = urls
        self.checked: set[tuple[str, str]] = set()

    def route(self, method: str, template: str) -> Route:
        return next(r for r in ROUTES if r.method == method and r.path == template)

    async def call(self, method: str, template: str, body: Any = None,
                   **params: str) -> Any:
        """The route's answer as its struct; the route counted as checked."""
        r = self.route(method, template)
        path = template.format(**params)
        async with self.http.request(method, f"{self.urls[r.upstream]}{path}",
                                     json=body) as resp:
            raw = await resp.read()
            assert resp.status == r.status, (method, path, resp.status, raw[:300])
        assert r.response is not None
        self.checked.add((method, template))
        return strictly(r.response, raw)

    async def error(self, method: str, path: str, upstream: str, body: Any, status: int
                    ) -> ErrorBody:
        async with self.http.request(method, f"{self.urls[upstream]}{path}", json=body) as resp:
            raw = await resp.read()
            assert resp.status == status, (path, resp.status, raw[:300])
        got: ErrorBody = strictly(ErrorBody, raw)
        return got


@pytest.fixture
async def contract(base_cfg: Config, embedd_url: str,
                   http: aiohttp.ClientSession) -> AsyncIterator[Contract]:
    # A vectord of its own that reaches this embedd (re-embedding and documents call it).
    vectord = await serve(vectord_app(with_section(base_cfg, "vectord",
                                                   embedd_url=(embedd_url,), tasks=True)))
    cfg = with_section(base_cfg, "matrixd", vectord_url=url_of(vectord), embedd_url=embedd_url,
                       playbook_corpus=f"pb_{uuid.uuid4().hex[:10]}")
    matrix = await serve(make_app(cfg))
    yield Contract(http, {"embedd": embedd_url, "vectord": url_of(vectord),
                          "matrixd": url_of(matrix)})
    await matrix.close()
    await vectord.close()


async def test_every_route_answers_its_struct(contract: Contract) -> None:
    c = contract
    emb = await c.call("POST", "/v1/embed", {"texts": TEXTS})
    models = await c.call("GET", "/v1/embed/models")
    model = models.models[0].id
    name = f"contract_{uuid.uuid4().hex[:10]}"
    C = "/v1/vectors/corpora/{name}"
    await c.call("POST", "/v1/vectors/corpora", {"name": name, "dim": emb.dim, "model": emb.model,
                                                  "defer_index": True})
    items = [{"id": f"d{i}", "vector": v, "text": t, "title": f"doc {i}", "tags": ["t"],
              "metadata": {"n": i, "nested": {"list": [1, "x"]}}}
             for i, (t, v) in enumerate(zip(TEXTS, emb.vectors, strict=True))]
    await c.call("POST", f"{C}/items", {"items": items, "model": emb.model}, name=name)
    await c.call("POST", f"{C}/index", name=name)
    await c.call("GET", C, name=name)
    described = await c.call("PATCH", C, {"description": "pets, cats and dogs"}, name=name)
    assert described.description == "pets, cats and dogs"
    await c.call("GET", f"{C}/profile", name=name)
    await c.call("GET", "/v1/vectors/corpora")
    await c.call("GET", f"{C}/items/{{id}}", name=name, id="d0")
    await c.call("GET", f"{C}/ids", name=name)
    await c.call("GET", "/v1/vectors/spaces")
    for mode in MODES:
        body: dict[str, Any] = {"mode": mode, "k": 3}
        if mode in ("vector", "hybrid"):
            body["query_vector"] = emb.vectors[0]
        if mode != "vector":
            body["query_text"] = "cats" if mode == "keyword" else "domesticated pets"
        one = await c.call("POST", f"{C}/search", body, name=name)
        assert one.hits, mode
        many = await c.call("POST", "/v1/vectors/search", {**body, "corpora": [name]})
        assert many.hits, mode
        text = {"query_text": body.get("query_text", "domesticated pets")}
        matrix = await c.call("POST", "/v1/matrix/search",
                              {**text, "mode": mode, "corpora": [name], "k": 3})
        assert matrix.hits, mode
    await c.call("GET", "/v1/matrix/corpora")
    recorded = await c.call("POST", "/v1/matrix/playbooks/record",
                            {"query_text": "pets", "answer_id": "d0", "answer_corpus": name,
                             "score": 1.0})
    await c.call("GET", "/v1/matrix/playbooks")
    # The typed path matrixd -> vectord with every part of its request: the playbook's
    # `include` (with factors in hybrid), the query vectors, filter, prefer, feedback and
    # shaping; vectord's Hit structs come back and matrixd's answer still decodes strictly.
    for mode in MODES:
        shaped: dict[str, Any] = {"query_text": "cats" if mode == "keyword" else "pets",
                                  "mode": mode, "corpora": [name], "k": 3, "use_playbook": True,
                                  "filter": {"tags_any": ["t"]}, "highlight": True,
                                  "facets": ["tags"], "group_by": "metadata.n"}
        if mode == "hybrid":
            shaped.update(prefer={"tags_any": ["t"]}, prf={"docs": 2, "terms": 3})
        typed = await c.call("POST", "/v1/matrix/search", shaped)
        assert typed.hits and typed.playbook is not None and typed.facets, mode
        assert all(h.from_playbook is not None and h.highlight for h in typed.hits), mode
    # The learned ranker: one recorded question is too few, so the model is the boost alone.
    trained = await c.call("POST", "/v1/matrix/ranker/train", {"wait": True})
    assert trained.trees == 0 and trained.reason and trained.current
    status = await c.call("GET", "/v1/matrix/ranker")
    assert [m.id for m in status.models if m.current and m.corpora == trained.corpora
            and m.playbook_corpus == trained.playbook_corpus] == [trained.id]
    ranked = await c.call("POST", "/v1/matrix/search", {"query_text": "pets", "corpora": [name],
                                                        "use_playbook": True})
    assert ranked.ranker is not None and not ranked.ranker.applied
    await c.call("DELETE", "/v1/matrix/playbooks/{playbook_id}",
                 playbook_id=str(recorded.playbook_id))
    await c.call("POST", "/v1/matrix/relevance",
                 {"focus": {"path": "src/pets.py", "text": "class Cat: pass",
                            "defined_symbols": ["Cat"]},
                  "chunks": [{"text": "Cat is a class", "source": "src/cat.py"}]})
    await c.call("POST", "/v1/matrix/analyze", {"query_text": "what did Alice say yesterday"})
    await c.call("POST", "/v1/matrix/normalize",
                 {"observations": [{"text": "Alice met Bob yesterday.",
                                    "reference_time": "2026-01-02T10:00:00Z"}]})
    await c.call("POST", "/v1/matrix/smart_search",
                 {"query_text": "domesticated pets", "corpora": [name], "k": 3})
    await c.call("POST", "/v1/matrix/search_auto",
                 {"query_text": "domesticated pets", "corpora": [name], "k": 3})
    answered = await c.call("POST", "/v1/matrix/answer",
                            {"query_text": "which pets were domesticated from wolves",
                             "corpora": [name], "k": 3, "use_playbook": True})
    assert answered.answered and answered.citations and answered.playbook is not None
    await c.call("POST", "/v1/matrix/answer/feedback",
                 {"query_text": "which pets were domesticated from wolves", "score": 1,
                  "cited": [{"corpus": name, "id": answered.citations[0].id}]})
    # Re-embedding: a corpus whose vectors are labelled with another model, moved to embedd's.
    legacy = f"{name}_old"
    await c.call("POST", "/v1/vectors/corpora", {"name": legacy, "dim": emb.dim,
                                                  "model": "legacy-model"})
    await c.call("POST", f"{C}/items", {"items": items, "model": "legacy-model"}, name=legacy)
    await c.call("POST", f"{C}/reembed", {"model": model}, name=legacy)
    await c.call("DELETE", C, name=legacy)
    # Storage and a conversion to another precision (a corpus of its own: it runs on).
    await c.call("GET", "/v1/vectors/storage")
    halved = f"{name}_half"
    await c.call("POST", "/v1/vectors/corpora", {"name": halved, "dim": emb.dim, "model": model})
    await c.call("POST", f"{C}/items", {"items": items, "model": model}, name=halved)
    await c.call("POST", f"{C}/convert", {"precision": "float32"}, name=halved)
    # Index settings: a new graph is built in the background (202; a corpus of its own).
    rebuilt = f"{name}_graph"
    await c.call("POST", "/v1/vectors/corpora", {"name": rebuilt, "dim": emb.dim, "model": model})
    await c.call("POST", f"{C}/items", {"items": items, "model": model}, name=rebuilt)
    await c.call("POST", f"{C}/index/settings", {"m": 8}, name=rebuilt)
    await c.call("POST", f"{C}/items/delete", {"ids": ["d3"]}, name=name)
    await c.call("DELETE", f"{C}/items/{{id}}", name=name, id="d2")
    # Documents and their tasks.
    D = "/v1/corpora/{name}/documents"
    docs = [{"id": f"p{i}", "title": f"page {i}", "text": f"# page {i}\n\n{t}\n\n## more\n\n{t}"}
            for i, t in enumerate(TEXTS)]
    task = await c.call("POST", D, {"documents": docs}, name=name)
    while not task.done:
        await asyncio.sleep(0.1)
        task = await c.call("GET", "/v1/tasks/{task_id}", task_id=str(task.id))
    assert task.state == "succeeded" and task.counts.added == 4, task
    assert [d.id for d in (await c.call("GET", D, name=name)).documents] == ["p0", "p1", "p2", "p3"]
    assert (await c.call("GET", f"{D}/{{id}}", name=name, id="p0")).chunks == ["p0#0", "p0#1"]
    assert task.id in [t.id for t in (await c.call("GET", "/v1/tasks")).tasks]
    await c.call("DELETE", f"{D}/{{id}}", name=name, id="p1")
    await c.call("POST", f"{D}/delete", {"ids": ["p2"]}, name=name)

    # Errors: one body for every daemon, the field named.
    bad = await c.error("POST", f"/v1/vectors/corpora/{name}/search", "vectord",
                        {"mode": "vector", "k": 0, "query_vector": emb.vectors[0]}, 400)
    assert bad.error.field == "k"
    missing = await c.error("POST", "/v1/vectors/corpora/no_such_corpus/search", "vectord",
                            {"mode": "lexical", "query_text": "x"}, 404)
    assert missing.error.code
    bad = await c.error("POST", "/v1/matrix/search", "matrixd", {"query_text": "x", "k": 0}, 400)
    assert bad.error.field == "k"
    # matrixd's own check turns the free-form options into vectord's structs: a bad one is
    # the caller's 400 naming it, before any corpus is searched (this one does not exist).
    for opts, field in (({"filter": {"tags_anny": ["t"]}}, "filter.tags_anny"),
                        ({"prf": {"docs": "two"}}, "prf.docs")):
        bad = await c.error("POST", "/v1/matrix/search", "matrixd",
                            {"query_text": "x", "corpora": ["no_such_corpus"], **opts}, 400)
        assert bad.error.field == field, bad
    bad = await c.error("POST", "/v1/embed", "embedd", {"texts": "not a list"}, 400)
    assert bad.error.field == "texts"

    # Keys (vectord holds them; this port is open, auth off).
    created = await c.call("POST", "/v1/keys", {"name": "contract", "actions": ["search"],
                                                 "corpora": [name]})
    assert created.key and [k.id for k in (await c.call("GET", "/v1/keys")).keys
                            if k.id == created.id]
    await c.call("DELETE", "/v1/keys/{key_id}", key_id=created.id)

    await c.call("DELETE", C, name=name)
    wanted = {(r.method, r.path) for r in ROUTES
              if r.upstream in DAEMONS and r.response is not None}
    assert wanted - c.checked == set(), "routes of the table no answer was checked for"
