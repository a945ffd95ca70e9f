"""The MCP server with the SDK's own client, over both transports, against the running stack.

HTTP: `mcp.client.streamable_http` at the gateway's /mcp (mcpd behind it). stdio:
`mcp.client.stdio` launching `lakehouse mcp --url <gateway>`. Auth is on in this stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import mcp_types as types
import psutil
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.agents.conftest import GUIDES, NOTES, Live, call
from tests.helpers import ROOT

BASE_TOOLS = {"search", "list_corpora", "get_item", "record_feedback", "sync_now", "sync_status"}
OPTIONAL = {"analyze_query": "/v1/matrix/analyze", "smart_search": "/v1/matrix/smart_search",
            "normalize_observations": "/v1/matrix/normalize", "search_auto": "/v1/matrix/search_auto"}


@contextlib.asynccontextmanager
async def http_session(live: Live, token: bool = True) -> AsyncIterator[ClientSession]:
    headers = live.auth if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client, \
            streamable_http_client(f"{live.url}/mcp", http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def stdio_session(live: Live, token: bool = True) -> AsyncIterator[ClientSession]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["LAKEHOUSE_CONFIG"] = str(ROOT / "lakehouse.toml")  # no tokens in it
    if token:
        env["LAKEHOUSE_TOKEN"] = live.token
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env,
                                   args=["-m", "internal.cli.main", "mcp", "--url", live.url])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


Opener = Callable[..., contextlib.AbstractAsyncContextManager[ClientSession]]
TRANSPORTS = {"http": http_session, "stdio": stdio_session}


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_lists_tools_with_descriptions_and_schemas(live: Live, transport: str) -> None:
    async with TRANSPORTS[transport](live) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert BASE_TOOLS <= set(tools)  # the sync tools too: this stack syncs a wiki
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60
        assert tool.input_schema["type"] == "object"
    assert "keyword" in (tools["search"].description or "")
    assert tools["search"].input_schema["required"] == ["query"]
    # Query-intelligence tools appear exactly when the gateway serves their routes.
    _, doc = call(f"{live.url}/openapi.json")
    for name, path in OPTIONAL.items():
        assert (name in tools) == (path in doc["paths"]), name


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_search_across_two_corpora_attributed(live: Live, transport: str) -> None:
    async with TRANSPORTS[transport](live) as session:
        result = await session.call_tool("search", {"query": "what water temperature for green tea", "k": 6})
    out = structured(result)
    corpora = {h["corpus"] for h in out["hits"]}
    assert {GUIDES, NOTES} <= corpora
    assert out["hits"][0]["id"] in ("g_green_tea", "n_tea_notes", "n_kettle")
    text = text_of(result)
    assert f"[{GUIDES}]" in text and f"[{NOTES}]" in text
    assert text.startswith("1. [")


@pytest.mark.parametrize(("transport", "query"), [
    ("http", "how is espresso made with pressure"),
    ("stdio", "what does error code E42 on the machine mean"),
])
async def test_feedback_then_playbook_search_shows_the_boost(live: Live, transport: str, query: str) -> None:
    # Vector mode: the boost halves the distance, so the runner-up overtakes the leader
    # (in hybrid the factor goes into the fusion, where a hit with no lexical match may
    # still trail a leader that tops both branches: the cap is by design).
    args = {"query": query, "corpora": [GUIDES, NOTES], "k": 5, "use_playbook": True,
            "mode": "vector"}
    async with TRANSPORTS[transport](live) as session:
        before = structured(await session.call_tool("search", args))["hits"]
        # a hit whose halved distance beats the one above it: the boost must lift it
        target = next(h for i, h in enumerate(before) if i > 0 and h["boost_factor"] == 1.0
                      and h["distance"] * 0.5 < before[i - 1]["distance"])
        fb = await session.call_tool("record_feedback", {
            "query": query, "answer_id": target["id"], "corpus": target["corpus"], "score": 1})
        assert structured(fb)["playbook_id"]
        assert "recorded" in text_of(fb)
        after_result = await session.call_tool("search", args)
    after = structured(after_result)
    hit = next(h for h in after["hits"] if (h["corpus"], h["id"]) == (target["corpus"], target["id"]))
    assert hit["boost_factor"] < 1.0
    assert hit["rank"] < target["rank"]
    assert after["playbook_boosted"] >= 1
    assert "feedback boost" in text_of(after_result)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_arguments_are_tool_errors_naming_them(live: Live, transport: str) -> None:
    async with TRANSPORTS[transport](live) as session:
        wrong_type = await session.call_tool("search", {"query": "tea", "k": "ten"})
        missing = await session.call_tool("search", {"k": 3})
        unknown = await session.call_tool("search", {"query": "tea", "colour": "green"})
        bad_mode = await session.call_tool("search", {"query": "tea", "mode": "psychic"})
        # Ranges are the route's to judge; its field is named as the tool's argument.
        out_of_range = await session.call_tool("search", {"query": "tea", "k": 100000})
        blank = await session.call_tool("search", {"query": "   ", "mode": "lexical", "corpora": [GUIDES]})
        bad_score = await session.call_tool("record_feedback", {
            "query": "tea", "answer_id": "g_green_tea", "corpus": GUIDES, "score": 7})
        no_item = await session.call_tool("get_item", {"corpus": GUIDES, "id": "no-such-item"})
    for result, argument in ((wrong_type, "k"), (missing, "query"), (unknown, "colour"),
                             (bad_mode, "mode"), (out_of_range, "k"), (bad_score, "score")):
        assert result.is_error, text_of(result)
        assert f"`{argument}`" in text_of(result), text_of(result)
        assert isinstance(result.structured_content, dict)
        assert result.structured_content["error"]["argument"] == argument
        assert "Traceback" not in text_of(result)
    assert blank.is_error or structured(blank)["hits"] == []
    assert no_item.is_error and "not_found" in text_of(no_item)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_get_item_and_list_corpora(live: Live, transport: str) -> None:
    async with TRANSPORTS[transport](live) as session:
        corpora = structured(await session.call_tool("list_corpora", {}))
        item = await session.call_tool("get_item", {"corpus": NOTES, "id": "n_e42"})
    assert {GUIDES, NOTES} <= {c["name"] for c in corpora["corpora"]}
    got = structured(item)
    assert got["id"] == "n_e42" and "water tank" in got["text"] and "vector" not in got
    assert "water tank is empty" in text_of(item)


async def test_sync_tools(live: Live) -> None:
    async with http_session(live) as session:
        status = structured(await session.call_tool("sync_status", {}))
        run = structured(await session.call_tool("sync_now", {}))
    assert status["corpus"] == "wiki"
    assert run["added"] + run["updated"] + run["unchanged"] == 3
    assert run["errors"] == []


async def test_http_without_token_is_refused(live: Live) -> None:
    # The SDK reports the gateway's 401 as an error response (raised out of its task group).
    with pytest.raises(BaseException) as caught:
        async with http_session(live, token=False) as session:
            await session.list_tools()
    assert "error response" in repr(caught.value), repr(caught.value)
    # The gateway says why, in its one error body.
    status, body = call(f"{live.url}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 401 and body["error"]["code"] == "unauthorized"


async def test_stdio_without_token_is_refused(live: Live) -> None:
    async with stdio_session(live, token=False) as session:
        result = await session.call_tool("search", {"query": "green tea"})
    assert result.is_error
    assert "unauthorized" in text_of(result)


async def test_stopped_daemon_is_named(live: Live) -> None:
    up = psutil.Process(live.proc.pid)
    pid = next(c.pid for c in up.children() if "internal.matrixd.server" in " ".join(c.cmdline()))
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).wait(10)
    async with http_session(live) as session:
        result = await session.call_tool("search", {"query": "green tea", "corpora": [GUIDES]})
    assert result.is_error
    assert "matrixd" in text_of(result)
    # The supervisor restarts it; later tests need it back.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, _ = call(f"{live.url}/v1/matrix/corpora", headers=live.auth)
        if status == 200:
            break
        await asyncio.sleep(0.3)
    assert status == 200


async def test_stdio_against_a_stopped_gateway_names_it(live: Live) -> None:
    dead = dataclasses.replace(live, url=f"http://127.0.0.1:{_closed_port()}")
    async with stdio_session(dead) as session:
        result = await session.call_tool("list_corpora", {})
    assert result.is_error
    assert "gateway" in text_of(result) and "unreachable" in text_of(result)


def _closed_port() -> int:
    from tests.stack.ports import free_port

    return free_port()


MCP_IDS = ["{.md#0", "}.md#0", "a#b", "100%", "50%25", "what?now", "a/b", "a/../b",
           "two words", "naïve café"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_get_item_of_any_id(live: Live, transport: str) -> None:
    """The get_item tool percent-encodes the id into the route's path (RFC 3986)."""
    corpus = f"kb_mcp_ids_{transport}"
    status, out = call(f"{live.url}/v1/vectors/corpora", {"name": corpus, "dim": 3,
                                                          "model": "toy"}, live.auth)
    assert status == 201, out
    items = [{"id": i, "text": f"item {n}", "vector": [1.0, n, 0.5]}
             for n, i in enumerate(MCP_IDS)]
    status, out = call(f"{live.url}/v1/vectors/corpora/{corpus}/items",
                       {"items": items, "model": "toy"}, live.auth)
    assert status == 200, out
    try:
        async with TRANSPORTS[transport](live) as session:
            for n, item_id in enumerate(MCP_IDS):
                got = structured(await session.call_tool("get_item", {"corpus": corpus,
                                                                      "id": item_id}))
                assert (got["id"], got["text"]) == (item_id, f"item {n}"), item_id
    finally:
        call(f"{live.url}/v1/vectors/corpora/{corpus}", None, live.auth, method="DELETE")
