"""`lakehouse up` (run the whole stack) and `lakehouse status` (is it healthy?)."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import msgspec

import lakehouse
from internal.cli.connect import add_url_arg, gateway_url, load_config, resolve_token
from internal.common import logs
from internal.common.errors import LakehouseError


def _up(args: argparse.Namespace) -> int:
    from internal.stack.run import up

    cfg = load_config(args)
    logs.configure(cfg.log.level, cfg.log.format, service="lakehouse-up")
    config_file = args.config or os.environ.get("LAKEHOUSE_CONFIG")
    if config_file is None and Path("lakehouse.toml").exists():
        config_file = "lakehouse.toml"
    return up(cfg, config_file=str(Path(config_file).resolve()) if config_file else None,
              log_dir=Path(args.log_dir) if args.log_dir else None,
              ready_timeout=args.timeout, replicas=args.replicas)


def _get(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except ValueError:
            return exc.code, None
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(getattr(exc, "reason", exc))


def _status(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    base = gateway_url(args, cfg)
    try:
        with lakehouse.Client(base, resolve_token(None, lambda: cfg), timeout=5, retries=0) as client:
            answer: lakehouse.types.Ready | None = client.ready()
    except LakehouseError:
        answer = None
    rows: list[tuple[str, str, str]] = [("gateway", "ok" if answer else "unreachable", base)]
    ready = answer is not None and answer.status == "ok"
    if answer is not None:
        for name, comp in sorted(answer.components.items()):
            rows.append((name, comp.status, comp.address or ""))
    else:
        # No gateway: ask each daemon where the config says it is.
        for name, section in (("embedd", cfg.embedd), ("vectord", cfg.vectord),
                              ("matrixd", cfg.matrixd), ("syncd", cfg.sync)):
            url = f"http://{section.host}:{section.port}"
            c, _ = _get(f"{url}/readyz", {})
            rows.append((name, "ok" if c == 200 else ("unavailable" if c == 0 else "not_ready"), url))
    if answer is not None:
        from internal.gateway.readiness import replicas_of

        components = {k: msgspec.to_builtins(v) for k, v in answer.components.items()}
        for r in replicas_of(components):
            use = ", in use" if r.get("in_use") else ""
            why = f", {r['reason']}" if r.get("reason") else ""
            rows.append(("replica", str(r.get("state")),
                         f"lag {r.get('lag_seconds')}s{use}{why}  {r.get('replica')}"))
    width = max(len(r[0]) for r in rows)
    for name, state, addr in rows:
        print(f"{name:<{width}}  {state:<11}  {addr}")
    print("ready" if ready else "not ready")
    return 0 if ready else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("up", help="run PostgreSQL and every daemon until Ctrl-C")
    p.add_argument("--log-dir", help="write each daemon's log to DIR/<daemon>.log (default: this terminal)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for readiness (default 180)")
    p.add_argument("--replicas", type=int, default=0, metavar="N",
                   help="also run N streaming standbys of the embedded PostgreSQL that "
                        "searches read from (default 0)")
    p.set_defaults(func=_up)
    p = sub.add_parser("status", help="show each component's readiness")
    add_url_arg(p)
    p.set_defaults(func=_status)


