"""`lakehouse ha status` (who leads, who follows, how far behind) and `ha switchover`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from internal.cli.connect import add_url_arg, gateway_token, gateway_url, load_config

if TYPE_CHECKING:
    from internal.config import Config

# The HTTP stack and the server's modules are imported by the commands themselves, so
# that `lakehouse --help` and the client commands start without them.
LEADER = "leader"  # internal.ha.LEADER


def _local_urls(cfg: Config) -> list[str]:
    """Patroni's REST APIs from [ha] patroni_urls, else the cluster `up --ha` made here."""
    from internal.stack import cluster

    if cfg.ha.patroni_urls:
        return list(cfg.ha.patroni_urls)
    return cluster.rest_urls(Path(cfg.ha.data_dir))


def _pid(cfg: Config, name: str) -> int | None:
    from internal.stack import cluster

    return cluster.postmaster_pid(Path(cfg.ha.data_dir) / name)


async def _direct(urls: list[str]) -> list[dict[str, Any]] | None:
    import aiohttp

    from internal.ha import patroni

    async with aiohttp.ClientSession() as session:
        found = await patroni.cluster(session, urls, timeout=2.0)
    return None if found is None else [m.as_dict() for m in found]


def backup_dsn(cfg: Config) -> str | None:
    """The node `lakehouse backup` copies from when an HA cluster is configured: a
    streaming replica (the leader keeps its I/O for writes), else the leader; None when
    there is no cluster."""
    urls = _local_urls(cfg)
    nodes = asyncio.run(_direct(urls)) if urls else None
    if not nodes:
        return None
    order = sorted(nodes, key=lambda n: (n.get("role") == LEADER,
                                         n.get("state") != "streaming"))
    best = order[0]
    if best.get("role") != LEADER and best.get("state") != "streaming":
        return None
    return f"host={best['host']} port={best['port']} user=postgres dbname=postgres"


def nodes_of(args: argparse.Namespace, cfg: Config) -> list[dict[str, Any]] | None:
    """The nodes as the gateway's /readyz reports them, else as Patroni itself does."""
    import msgspec

    import lakehouse
    from internal.ha.status import from_readyz
    from lakehouse.errors import LakehouseError

    nodes: list[dict[str, Any]] | None = None
    try:
        with lakehouse.Client(gateway_url(args), gateway_token(args), timeout=5,
                              retries=0) as client:
            answer = client.ready()
        nodes = from_readyz({k: msgspec.to_builtins(v) for k, v in answer.components.items()})
    except LakehouseError:
        nodes = None
    if nodes is None:
        urls = _local_urls(cfg)
        nodes = asyncio.run(_direct(urls)) if urls else None
    for n in nodes or []:
        if n.get("pid") is None:
            n["pid"] = _pid(cfg, str(n.get("name")))
    return nodes


def _status(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    nodes = nodes_of(args, cfg)
    if nodes is None:
        print("no HA cluster: neither the gateway nor [ha] patroni_urls names one",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"nodes": nodes}))
    else:
        from internal.ha.status import table

        print(table(nodes))
    return 0 if any(n.get("role") == LEADER for n in nodes) else 1


async def _switchover(api_url: str, leader: str, to: str | None) -> tuple[int, str]:
    import aiohttp

    from internal.ha import patroni

    body = {"leader": leader, **({"candidate": to} if to else {})}
    async with aiohttp.ClientSession() as session:
        return await patroni.post(session, api_url, "/switchover", body)


def _switch(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    nodes = nodes_of(args, cfg) or []
    lead = next((n for n in nodes if n.get("role") == LEADER), None)
    if lead is None or not lead.get("api_url"):
        print("ha switchover: no leader found", file=sys.stderr)
        return 1
    if args.to and args.to not in {n.get("name") for n in nodes}:
        print(f"ha switchover: --to: no node {args.to!r}", file=sys.stderr)
        return 2
    started = time.monotonic()
    status, text = asyncio.run(_switchover(str(lead["api_url"]), str(lead["name"]), args.to))
    if status != 200:
        print(f"ha switchover: Patroni answered {status}: {text.strip()}", file=sys.stderr)
        return 1
    # Patroni answers once the old leader is demoted; wait for the new one to run.
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        now = next((n for n in nodes_of(args, cfg) or [] if n.get("role") == LEADER
                    and n.get("state") == "running"), None)
        if now is not None and now.get("name") != lead["name"]:
            print(f"leader {lead['name']} -> {now['name']} "
                  f"({time.monotonic() - started:.1f}s)")
            return 0
        time.sleep(0.25)
    print(f"ha switchover: no new leader after {args.timeout:g}s", file=sys.stderr)
    return 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ha", help="the PostgreSQL HA cluster: status, planned switchover")
    ha = p.add_subparsers(dest="ha_command", required=True, metavar="COMMAND")
    s = ha.add_parser("status", help="each node's role, state, lag, timeline and pid")
    add_url_arg(s)
    s.add_argument("--json", action="store_true", help='print {"nodes": [...]}')
    s.set_defaults(func=_status)
    s = ha.add_parser("switchover", help="hand the leader role to another node (planned)")
    add_url_arg(s)
    s.add_argument("--to", metavar="NODE", help="the new leader (default: Patroni's choice "
                   "among the synchronous standbys)")
    s.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    s.set_defaults(func=_switch)
