"""Which tools this Lakehouse offers, and calling one: each a request to the gateway.

Both transports use this: mcpd (streamable HTTP behind the gateway's /mcp, with the
caller's bearer token passed on) and `lakehouse mcp` (stdio, with the token from the
environment). Optional tools are listed only when the gateway serves their route
(its /openapi.json, else a probe), the sync tools only when sync is configured.
Every call goes through the public client (`lakehouse.AsyncClient.request`): a tool's
structured result is its route's JSON answer as sent.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec
import structlog

from internal.clients.base import current_request_id
from internal.common.errors import InvalidArgument, LakehouseError
from internal.common.web import REQUEST_ID_HEADER, decode
from internal.mcpd import render
from internal.mcpd.tools import BY_NAME, TOOLS, GetItemArgs, Tool, argument_name, route_path
from lakehouse import AsyncClient
from lakehouse.errors import answered

log = structlog.get_logger()

# Surfaces cached at once (one per credential seen within `ttl`).
MAX_SURFACES = 1024


class ToolError(Exception):
    """A tool call that failed: the code and message of the route (or of the arguments),
    and the argument at fault when there is one."""

    def __init__(self, code: str, message: str, argument: str | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.argument = argument
        self.status = status

    def text(self) -> str:
        where = f" (argument `{self.argument}`)" if self.argument else ""
        return f"{self.code}{where}: {self.message}"

    def structured(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.argument:
            err["argument"] = self.argument
        if self.status:
            err["status"] = self.status
        return {"error": err}


@dataclass(frozen=True)
class Surface:
    """What the gateway serves right now."""

    tools: tuple[Tool, ...]
    # POST /v1/matrix/search without `corpora` searches every corpus (its schema says so).
    corpora_optional: bool


@dataclass(frozen=True)
class Result:
    structured: Any
    text: str


def _error_from(exc: LakehouseError, tool: Tool | None = None) -> ToolError:
    field = getattr(exc, "field", None)
    arg = argument_name(tool, field) if tool is not None else field
    message = exc.message
    if field and arg and arg != field and message.startswith(f"{field}:"):
        message = f"{arg}:{message[len(field) + 1:]}"
    return ToolError(exc.code, message, arg, exc.status)


class Toolbox:
    def __init__(self, session: aiohttp.ClientSession, gateway_url: str, *,
                 playbook_corpus: str, timeout: float = 3600.0, ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.session = session
        self.gateway_url = gateway_url.rstrip("/")
        self.playbook_corpus = playbook_corpus
        self.timeout = timeout
        self.ttl = ttl
        self._clock = clock
        # Per credential: what one key may do (a scoped key sees no sync tools) is never
        # offered to another. Keyed by a hash of the Authorization header, never the secret.
        self._surfaces: dict[str, tuple[float, Surface]] = {}

    def _gateway(self, headers: Mapping[str, str]) -> AsyncClient:
        """The client for one caller: its headers (bearer token, request id) and no token
        of mcpd's own, on the shared session; no retries (the caller's agent decides)."""
        sent = dict(headers)
        rid = current_request_id()
        if rid and REQUEST_ID_HEADER not in sent:
            sent[REQUEST_ID_HEADER] = rid
        return AsyncClient(self.gateway_url, token="", headers=sent, session=self.session,
                           timeout=self.timeout, retries=0)

    # ---- what is offered ---------------------------------------------------------------

    async def _route_served(self, gw: AsyncClient, tool: Tool, paths: Mapping[str, Any]) -> bool:
        if tool.method.lower() in (paths.get(tool.path) or {}):
            return True
        # Not in the API document: ask the route itself. An empty body is rejected (400)
        # by a route that exists and is a 404/405 where none does; nothing is done either way.
        try:
            await gw.request(tool.method, tool.path, body={})
        except LakehouseError as exc:
            if not answered(exc) or exc.status == 401:
                raise _error_from(exc) from None
            return exc.status not in (404, 405, 501, 502, 503)
        return True

    async def _sync_configured(self, gw: AsyncClient) -> bool:
        try:
            await gw.request("GET", "/v1/sync/status")
        except LakehouseError as exc:
            if not answered(exc) or exc.status == 401:
                raise _error_from(exc) from None
            return False  # 503 sync_not_configured (or syncd down: nothing to offer now)
        return True

    async def surface(self, headers: Mapping[str, str]) -> Surface:
        """The tools on offer (cached for `ttl` seconds)."""
        now = self._clock()
        who = hashlib.sha256(headers.get("Authorization", "").encode()).hexdigest()
        cached = self._surfaces.get(who)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        gw = self._gateway(headers)
        try:
            doc = await gw.request("GET", "/openapi.json")
            paths = doc.get("paths") or {}
            schema = ((doc.get("components") or {}).get("schemas") or {}).get("MatrixSearchRequest") or {}
            # An unknown schema counts as "required": listing the corpora is always safe.
            corpora_optional = "corpora" not in schema.get("required", ["corpora"])
            tools: list[Tool] = []
            sync_on: bool | None = None
            for tool in TOOLS:
                if tool.optional_route and not await self._route_served(gw, tool, paths):
                    continue
                if tool.needs_sync:
                    if sync_on is None:
                        sync_on = await self._sync_configured(gw)
                    if not sync_on:
                        continue
                tools.append(tool)
        except LakehouseError as exc:
            raise _error_from(exc) from None
        found = Surface(tuple(tools), corpora_optional)
        if len(self._surfaces) >= MAX_SURFACES:  # bounded: many short-lived tokens
            self._surfaces.clear()
        self._surfaces[who] = (now, found)
        return found

    # ---- calling one -------------------------------------------------------------------

    async def all_corpora(self, gw: AsyncClient) -> list[str]:
        """Every searchable corpus, for a search that named none (the playbook is not one).

        Only used while POST /v1/matrix/search requires `corpora`; once its schema makes
        the field optional, the route itself searches them all.
        """
        out = await gw.request("GET", "/v1/matrix/corpora")
        return [str(c["name"]) for c in out.get("corpora", [])
                if c.get("name") != self.playbook_corpus]

    async def call(self, name: str, arguments: Mapping[str, Any] | None,
                   headers: Mapping[str, str]) -> Result:
        """Run one tool; raises ToolError naming the argument or the daemon at fault."""
        tool = BY_NAME.get(name)
        if tool is None:
            raise ToolError("unknown_tool", f"no tool named {name!r}; see tools/list")
        try:
            args = decode(msgspec.json.encode(dict(arguments or {})), tool.args)
        except InvalidArgument as exc:
            raise ToolError("invalid_argument", exc.message, exc.field, 400) from None
        surface = await self.surface(headers)
        if tool.name not in {t.name for t in surface.tools}:
            why = ("the wiki sync is not configured ([sync] wiki_dir)" if tool.needs_sync
                   else f"this Lakehouse does not serve {tool.method} {tool.path}")
            raise ToolError("tool_unavailable", f"{name}: {why}")
        gw = self._gateway(headers)
        try:
            out = await self._run(tool, args, gw, surface)
        except LakehouseError as exc:
            raise _error_from(exc, tool) from None
        return Result(out, render.render(tool.name, out))

    async def _run(self, tool: Tool, args: msgspec.Struct, gw: AsyncClient,
                   surface: Surface) -> Any:
        if tool.name == "list_corpora":
            return {"corpora": (await gw.request("GET", tool.path))["corpora"]}
        if isinstance(args, GetItemArgs):
            out = await gw.request("GET", route_path(tool, args))
            out.pop("vector", None)  # hundreds of numbers no model reads
            return out
        body = tool.body(args)
        if tool.fills_corpora and body is not None and "corpora" not in body \
                and not surface.corpora_optional:
            body["corpora"] = await self.all_corpora(gw)
        return await gw.request(tool.method, route_path(tool, args), body=body)
