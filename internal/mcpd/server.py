"""mcpd: Lakehouse's tools for AI agents over MCP (the official SDK), behind the gateway's /mcp.

Streamable HTTP, stateless, JSON answers: every POST /mcp is complete in itself, so any
replica can serve it and the gateway relays it like any other JSON route. The same
Server runs over stdio for `lakehouse mcp` (internal/mcpd/stdio.py). Each tool is a call
to the gateway's HTTP API with the caller's bearer token, so mcpd holds no token and
enforces nothing the gateway does not.
"""

from __future__ import annotations

import contextlib
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import mcp_types as types
import structlog
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from internal.common import logs
from internal.common.daemon import EXIT_CONFIG, warn_renamed
from internal.common.lsn import REQUEST_LSN, WRITTEN, format_lsn
from internal.common.web import REQUEST_ID_HEADER
from internal.config import Config, ConfigError, load, redacted
from internal.mcpd.toolbox import Toolbox, ToolError

log = structlog.get_logger()

INSTRUCTIONS = (
    "Lakehouse is a self-hosted retrieval service over several corpora. Call `search` with a "
    "question (all corpora by default); each hit says which corpus it came from. Use mode "
    "`keyword` for exact names, ids and error codes. Use `get_item` for a hit's full text and "
    "`record_feedback` to say which hit answered the question, so later searches with "
    "use_playbook rank it higher.")

HeadersOf = Callable[[ServerRequestContext[Toolbox, Any]], Mapping[str, str]]


def http_headers(ctx: ServerRequestContext[Toolbox, Any]) -> dict[str, str]:
    """The caller's bearer token and request id, passed on to the gateway."""
    request = ctx.request
    out: dict[str, str] = {}
    headers = getattr(request, "headers", None)
    if headers is not None:
        if headers.get("authorization"):
            out["Authorization"] = headers["authorization"]
        if headers.get(REQUEST_ID_HEADER):
            out[REQUEST_ID_HEADER] = headers[REQUEST_ID_HEADER]
    return out


# Sessions whose last write position is kept (the least recently writing dropped first).
SESSIONS_KEPT = 10_000


def _session_key(ctx: ServerRequestContext[Toolbox, Any]) -> str:
    """The MCP session a tool call belongs to: its Mcp-Session-Id over HTTP (else the
    caller's token), the process over stdio or in-process."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return "process"
    sid = headers.get("mcp-session-id")
    return f"session:{sid}" if sid else f"auth:{headers.get('authorization', '')}"


def _error_result(exc: ToolError) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=exc.text())],
                                structured_content=exc.structured(), is_error=True)


def build_server(gateway_url: str, *, playbook_corpus: str, timeout: float, ttl: float,
                 headers_of: HeadersOf) -> Server[Toolbox]:
    """The MCP server: tools/list and tools/call over a Toolbox bound to the gateway."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Toolbox]) -> AsyncIterator[Toolbox]:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
            yield Toolbox(session, gateway_url, playbook_corpus=playbook_corpus,
                          timeout=timeout, ttl=ttl)

    async def list_tools(ctx: ServerRequestContext[Toolbox, Any],
                         _: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            surface = await ctx.lifespan_context.surface(headers_of(ctx))
        except ToolError as exc:
            raise MCPError(code=types.INTERNAL_ERROR if (exc.status or 500) >= 500 else types.INVALID_REQUEST,
                           message=exc.text()) from None
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema(),
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only))
            for t in surface.tools])

    # Read-your-writes within an MCP session: the highest WAL position its tool calls'
    # writes were answered with goes with every later call of the session (by its
    # Mcp-Session-Id; over stdio, or for an in-process client, the process is the session).
    session_lsns: OrderedDict[str, int] = OrderedDict()

    async def call_tool(ctx: ServerRequestContext[Toolbox, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        headers = dict(headers_of(ctx))
        rid = headers.pop(REQUEST_ID_HEADER, None)
        key = _session_key(ctx)
        seen = session_lsns.get(key)
        written: list[int] = []
        lsn_token = REQUEST_LSN.set(format_lsn(seen) if seen is not None else None)
        written_token = WRITTEN.set(written)
        try:
            return await _call_tool(ctx, params, headers, rid)
        finally:
            WRITTEN.reset(written_token)
            REQUEST_LSN.reset(lsn_token)
            if written:
                session_lsns[key] = max(written + ([seen] if seen is not None else []))
                session_lsns.move_to_end(key)
                while len(session_lsns) > SESSIONS_KEPT:
                    session_lsns.popitem(last=False)

    async def _call_tool(ctx: ServerRequestContext[Toolbox, Any],
                         params: types.CallToolRequestParams, headers: dict[str, str],
                         rid: str | None) -> types.CallToolResult:
        with structlog.contextvars.bound_contextvars(**({"request_id": rid} if rid else {})):
            try:
                result = await ctx.lifespan_context.call(params.name, params.arguments, headers)
            except ToolError as exc:
                log.info("tool_failed", tool=params.name, code=exc.code, argument=exc.argument)
                # A tool error is a result the model reads and can correct (MCP spec), not
                # a protocol error; it names the argument or the daemon at fault.
                return _error_result(exc)
            except Exception:
                # The edge of the tool call, like the HTTP error middleware: the detail
                # goes to the log, the caller gets "internal error", never a traceback.
                log.exception("tool_crashed", tool=params.name)
                return _error_result(ToolError("internal", "internal error", status=500))
            log.info("tool_called", tool=params.name)
        structured = result.structured if isinstance(result.structured, dict) else {"result": result.structured}
        return types.CallToolResult(content=[types.TextContent(text=result.text)],
                                    structured_content=structured)

    return Server("lakehouse", version="0.1.0", instructions=INSTRUCTIONS, lifespan=lifespan,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def make_app(cfg: Config) -> Starlette:
    """mcpd's ASGI app: POST /mcp (streamable HTTP), /healthz and /readyz."""
    m = cfg.mcpd
    server = build_server(m.gateway_url, playbook_corpus=cfg.matrixd.playbook_corpus,
                          timeout=m.timeout_seconds, ttl=m.tools_ttl_seconds,
                          headers_of=http_headers)

    async def health(_: Request) -> JSONResponse:
        # Ready when serving: its tools depend on the gateway, whose own /readyz asks us.
        return JSONResponse({"status": "ok"})

    return server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host=m.host,
        custom_starlette_routes=[Route("/healthz", health), Route("/readyz", health)])


def main() -> int:
    try:
        cfg = load()
        logs.configure(cfg.log.level, cfg.log.format, service="mcpd")
        app = make_app(cfg)
    except ConfigError as exc:  # one line, not retried (internal.common.daemon)
        print(str(exc), file=sys.stderr, flush=True)
        return EXIT_CONFIG
    log.info("config", config=redacted(cfg))
    warn_renamed(cfg)
    config = uvicorn.Config(app, host=cfg.mcpd.host, port=cfg.mcpd.port, log_config=None,
                            access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
