"""Which tools are offered, decided from what the gateway serves.

A small stand-in gateway (real HTTP) plays a Lakehouse that already serves some of
the query-intelligence routes and takes `corpora` as optional, which the real stack in
tests/agents does not (yet): the toolbox must pick both up with no change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from internal.mcpd.toolbox import Toolbox, ToolError
from tests.helpers import serve, url_of

AUTH = {"Authorization": "Bearer t"}
SEEN = web.AppKey("seen", list[dict[str, Any]])
LSNS = web.AppKey("lsns", list[str | None])  # the Lakehouse-LSN each search carried


def gateway_app(corpora_required: bool) -> web.Application:
    seen: list[dict[str, Any]] = []

    @web.middleware
    async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path != "/openapi.json" and request.headers.get("Authorization") != "Bearer t":
            return web.json_response({"error": {"code": "unauthorized", "message": "no token"}}, status=401)
        return await handler(request)

    async def openapi(_: web.Request) -> web.Response:
        return web.json_response({
            "paths": {"/v1/matrix/search": {"post": {}}, "/v1/matrix/analyze": {"post": {}}},
            "components": {"schemas": {"MatrixSearchRequest": {
                "required": ["corpora"] if corpora_required else []}}}})

    lsns: list[str | None] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        lsns.append(request.headers.get("Lakehouse-LSN"))
        return web.json_response({"hits": [], "echo": body})

    async def smart(request: web.Request) -> web.Response:
        # Served but not in the API document: found by probing with an empty body.
        body = await request.json()
        if not body:
            return web.json_response({"error": {"code": "invalid_argument", "message": "query_text: required",
                                                "field": "query_text"}}, status=400)
        return web.json_response({"hits": [], "plan": {"sub_queries": []}, "iterations": []})

    async def corpora(_: web.Request) -> web.Response:
        return web.json_response({"corpora": [{"name": "docs"}, {"name": "notes"}, {"name": "playbook_memory"}]})

    async def sync_status(_: web.Request) -> web.Response:
        return web.json_response({"error": {"code": "sync_not_configured", "message": "off"}}, status=503)

    app = web.Application(middlewares=[auth])
    app[SEEN] = seen
    app[LSNS] = lsns
    app.router.add_get("/openapi.json", openapi)
    app.router.add_post("/v1/matrix/search", echo)
    app.router.add_post("/v1/matrix/analyze", echo)
    app.router.add_post("/v1/matrix/smart_search", smart)
    app.router.add_get("/v1/matrix/corpora", corpora)
    app.router.add_get("/v1/sync/status", sync_status)
    return app


@pytest.fixture
async def toolbox_for() -> AsyncIterator[Any]:
    servers = []
    async with aiohttp.ClientSession() as session:
        async def make(corpora_required: bool) -> tuple[Toolbox, list[dict[str, Any]]]:
            app = gateway_app(corpora_required)
            server = await serve(app)
            servers.append(server)
            return Toolbox(session, url_of(server), playbook_corpus="playbook_memory"), app[SEEN]

        yield make
        for server in servers:
            await server.close()


async def test_optional_tools_follow_the_served_routes(toolbox_for: Any) -> None:
    toolbox, _ = await toolbox_for(False)
    names = {t.name for t in (await toolbox.surface(AUTH)).tools}
    assert {"search", "list_corpora", "get_item", "record_feedback"} <= names
    assert "analyze_query" in names  # in the API document
    assert "smart_search" in names  # not documented, but the route answers
    assert "normalize_observations" not in names and "search_auto" not in names  # 404
    assert "sync_now" not in names and "sync_status" not in names  # sync not configured
    with pytest.raises(ToolError) as caught:
        await toolbox.call("sync_now", {}, AUTH)
    assert caught.value.code == "tool_unavailable" and "wiki_dir" in caught.value.message
    result = await toolbox.call("analyze_query", {"query": "who", "now": "2023-05-08"}, AUTH)
    assert result.structured["echo"] == {"query_text": "who", "now": "2023-05-08"}


async def test_search_without_corpora_uses_the_route_default_once_it_has_one(toolbox_for: Any) -> None:
    toolbox, seen = await toolbox_for(False)
    await toolbox.call("search", {"query": "tea"}, AUTH)
    assert seen[-1] == {"query_text": "tea", "highlight": True}  # the snippet is the highlight


async def test_search_without_corpora_lists_them_while_the_route_requires_them(toolbox_for: Any) -> None:
    toolbox, seen = await toolbox_for(True)
    await toolbox.call("search", {"query": "tea"}, AUTH)
    assert seen[-1] == {"query_text": "tea", "corpora": ["docs", "notes"],  # not the playbook
                        "highlight": True}
    await toolbox.call("search", {"query": "tea", "corpora": ["docs"]}, AUTH)
    assert seen[-1]["corpora"] == ["docs"]


async def test_without_the_token_the_listing_is_refused(toolbox_for: Any) -> None:
    toolbox, _ = await toolbox_for(False)
    with pytest.raises(ToolError) as caught:
        await toolbox.surface({})
    assert caught.value.code == "unauthorized" and caught.value.status == 401


async def test_an_mcp_session_sends_back_the_position_of_its_writes() -> None:
    """A session's record_feedback answered with Lakehouse-LSN: its later calls carry it
    (read-your-writes on read replicas). In-process (as over stdio) the process is the
    session, so a second client of the same server carries it too."""
    from mcp import Client

    from internal.mcpd.server import build_server

    async def record(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"playbook_id": "p1", "recorded": True},
                                 headers={"Lakehouse-LSN": "0/A1B2C3"})

    app = gateway_app(corpora_required=False)
    app.router.add_post("/v1/matrix/playbooks/record", record)
    server = await serve(app)
    try:
        mcp_server = build_server(url_of(server), playbook_corpus="playbook_memory",
                                  timeout=30, ttl=10, headers_of=lambda _: dict(AUTH))
        async with Client(mcp_server) as first:
            await first.call_tool("search", {"query": "tea", "corpora": ["docs"]})
            out = await first.call_tool("record_feedback", {
                "query": "tea", "answer_id": "g1", "corpus": "docs", "score": 1})
            assert not out.is_error, out
            await first.call_tool("search", {"query": "tea", "corpora": ["docs"]})
        async with Client(mcp_server) as second:
            await second.call_tool("search", {"query": "tea", "corpora": ["docs"]})
    finally:
        await server.close()
    assert app[LSNS] == [None, "0/A1B2C3", "0/A1B2C3"]
