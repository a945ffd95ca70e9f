"""`lakehouse mcp`: the same MCP server over stdio, for desktop agents, against a running stack."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
from mcp.server.stdio import stdio_server

from internal.mcpd.server import build_server


def serve_stdio(gateway_url: str, headers: Mapping[str, str], *, playbook_corpus: str,
                timeout: float = 3600.0, ttl: float = 10.0) -> None:
    """Serve MCP on stdin/stdout until the client closes it; tools call gateway_url."""
    fixed = dict(headers)
    server = build_server(gateway_url, playbook_corpus=playbook_corpus, timeout=timeout, ttl=ttl,
                          headers_of=lambda _ctx: fixed)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
