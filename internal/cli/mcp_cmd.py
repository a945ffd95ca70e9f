"""`lakehouse mcp`: Lakehouse's MCP tools over stdio, for agents that launch a command."""

from __future__ import annotations

import argparse

from internal.cli.connect import add_url_arg, auth_headers, gateway_url, load_config


def _mcp(args: argparse.Namespace) -> int:
    from internal.common import logs
    from internal.mcpd.stdio import serve_stdio  # the SDK loads only for this command

    cfg = load_config(args)
    # stdout is the MCP channel: logs go to stderr.
    logs.configure(cfg.log.level, cfg.log.format, service="mcp")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else auth_headers(args)
    serve_stdio(gateway_url(args), headers, playbook_corpus=cfg.matrixd.playbook_corpus,
                timeout=cfg.mcpd.timeout_seconds, ttl=cfg.mcpd.tools_ttl_seconds)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("mcp", help="serve the MCP tools over stdio (for desktop agents)",
                       description="Serve Lakehouse's MCP tools on stdin/stdout; every tool "
                                   "calls the running stack's gateway at --url.")
    add_url_arg(p)
    p.add_argument("--token", help="bearer token for the gateway (default: $LAKEHOUSE_TOKEN)")
    p.set_defaults(func=_mcp)
