"""`lakehouse up` (run the whole stack) and `lakehouse status` (is it healthy?)."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lakehouse
from internal.cli.connect import add_url_arg, gateway_token, gateway_url, load_config
from internal.cli.storage_view import conversion_lines, storage_lines
from internal.cli.storage_view import reembed_lines as reembed_lines
from lakehouse.errors import LakehouseError

if TYPE_CHECKING:  # `lakehouse --help` imports no msgspec (tests/cli/test_startup.py)
    from lakehouse.types import Corpus, SyncStatus
    from lakehouse.wire.storage import StorageStatus


def _up(args: argparse.Namespace) -> int:
    from internal.common import logs
    from internal.stack.run import up

    cfg = load_config(args)
    # The terminal shows progress, then warnings and errors; --verbose: everything,
    # the daemons' request logs too (they always go to --log-dir).
    level = cfg.log.level if args.verbose or cfg.log.level in ("warning", "error") \
        else "warning"
    logs.configure(level, cfg.log.format, service="lakehouse-up")
    config_file = args.config or os.environ.get("LAKEHOUSE_CONFIG")
    if config_file is None and Path("lakehouse.toml").exists():
        config_file = "lakehouse.toml"
    return up(cfg, config_file=str(Path(config_file).resolve()) if config_file else None,
              log_dir=Path(args.log_dir), ready_timeout=args.timeout, replicas=args.replicas,
              echo=sys.stderr.buffer if args.verbose else None, ha_nodes=args.ha)


def _daemon_state(url: str) -> str:
    """A daemon's readiness asked directly (no gateway): ok, not_ready or unavailable."""
    try:
        with lakehouse.Client(url, "", timeout=5, retries=0) as client:
            client.request("GET", "/readyz")
    except LakehouseError as exc:
        return "unavailable" if exc.code in lakehouse.errors.NO_ANSWER else "not_ready"
    return "ok"


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ") if at else "-"


def sync_lines(status: SyncStatus | None, off: bool = False
               ) -> tuple[tuple[str, str, str] | None, list[str]]:
    """The wiki sync's row of `lakehouse status` and the lines below the table: each error
    of its last run with its message. None: nothing to say (the key may not see it)."""
    if off:
        return ("sync", "off", "[sync] wiki_dir is not set"), []
    if status is None:
        return None, []
    last = status.last_run
    where = f"{status.wiki_dir} -> corpus {status.corpus}"
    if last is None:
        state = "running" if status.running else "waiting"
        return ("sync", state, f"{where}, first run not done yet"), []
    whole = [e for e in last.errors if e.path == "."]
    state = "failed" if whole else ("errors" if last.errors else "ok")
    if status.running:
        state = "running"
    counts = ", ".join(f"{k} {getattr(last, k)}" for k in ("added", "updated", "deleted",
                                                           "unchanged"))
    row = ("sync", state, f"{where}, last run {_when(last.finished_at)}: {counts}, "
                          f"{len(last.errors)} errors; next {_when(status.next_run_at)}")
    lines = [f"sync error: {e.error}" if e.path == "." else f"sync error: {e.path}: {e.error}"
             for e in last.errors]
    return row, lines


def _corpora(client: lakehouse.Client) -> list[Corpus]:
    """The corpora this key may see; none when they cannot be listed (vectord down: its
    row says so; a key without the right)."""
    try:
        return client.list_corpora()
    except LakehouseError:
        return []


def _storage(client: lakehouse.Client) -> StorageStatus | None:
    """The corpora's sizes and the memory held; None when vectord cannot tell."""
    try:
        return client.storage()
    except LakehouseError:
        return None


def _sync_status(client: lakehouse.Client) -> tuple[SyncStatus | None, bool]:
    """(the sync's status, sync is off); (None, False) when this key may not see it, or
    syncd is stopped (its row and the reason are the components')."""
    try:
        return client.sync_status(), False
    except LakehouseError as exc:
        return None, exc.code == "sync_not_configured"


def stopped_lines(components: dict[str, Any]) -> list[str]:
    """A line for each part that stopped on its configuration, with why (the reason its
    stand-in serves: internal/stack/standin.py)."""
    out = []
    for name, comp in sorted(components.items()):
        detail = getattr(comp, "detail", None)
        if isinstance(detail, dict) and detail.get("status") == "failed" and detail.get("error"):
            out.append(f"{name}: {detail['error']}")
    return out


def _status(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    base = gateway_url(args)
    sync: tuple[SyncStatus | None, bool] = (None, False)
    corpora: list[Corpus] = []
    storage: StorageStatus | None = None
    try:
        with lakehouse.Client(base, gateway_token(args), timeout=5, retries=0) as client:
            answer: lakehouse.types.Ready | None = client.ready()
            sync = _sync_status(client)
            corpora = _corpora(client)
            storage = _storage(client)
    except LakehouseError:
        answer = None
    rows: list[tuple[str, str, str]] = [("gateway", "ok" if answer else "unreachable", base)]
    ready = answer is not None and answer.status == "ok"
    notes: list[str] = []
    if answer is not None:
        stopped = stopped_lines(answer.components)
        for name, comp in sorted(answer.components.items()):
            held = any(line.startswith(f"{name}: ") for line in stopped)
            rows.append((name, "stopped" if held else str(comp.status), comp.address or ""))
        notes += stopped
    elif not (getattr(args, "url", None) or os.environ.get("LAKEHOUSE_URL")):
        # No gateway at the configured address: ask each daemon where the config says it
        # is. A URL given (--url, $LAKEHOUSE_URL) names another stack: only it is reported.
        for name, section in (("embedd", cfg.embedd), ("vectord", cfg.vectord),
                              ("matrixd", cfg.matrixd), ("syncd", cfg.sync)):
            url = f"http://{section.host}:{section.port}"
            rows.append((name, _daemon_state(url), url))
    if answer is not None:
        import msgspec

        from internal.gateway.readiness import replicas_of

        for r in replicas_of(answer):
            use = ", in use" if r.get("in_use") else ""
            why = f", {r['reason']}" if r.get("reason") else ""
            rows.append(("replica", str(r.get("state")),
                         f"lag {r.get('lag_seconds')}s{use}{why}  {r.get('replica')}"))
        from internal.ha.status import from_readyz

        components = {k: msgspec.to_builtins(v) for k, v in answer.components.items()}
        for n in from_readyz(components) or []:  # the Patroni cluster, when there is one
            rows.append(("ha", str(n.get("state")), f"{n.get('name')} {n.get('role')} "
                         f"timeline {n.get('timeline')} lag {n.get('lag')}"))
    sync_row, sync_notes = sync_lines(*sync)
    notes += sync_notes
    if sync_row is not None:
        rows.append(sync_row)
    for lines_of in (reembed_lines, conversion_lines):
        moving, moving_notes = lines_of(corpora)
        rows += moving
        notes += moving_notes
    if storage is not None:
        notes += storage_lines(storage)
    width = max(len(r[0]) for r in rows)
    for name, state, addr in rows:
        print(f"{name:<{width}}  {state:<11}  {addr}")
    for line in notes:
        print(line)
    print("ready" if ready else "not ready")
    return 0 if ready else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("up", help="run PostgreSQL and every daemon until Ctrl-C")
    p.add_argument("--log-dir", default="var/log",
                   help="write each daemon's log to DIR/<daemon>.log (default: var/log)")
    p.add_argument("--verbose", action="store_true",
                   help="also show the daemons' logs (every request) in this terminal")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for readiness (default 180)")
    p.add_argument("--replicas", type=int, default=0, metavar="N",
                   help="also run N streaming standbys of the embedded PostgreSQL that "
                        "searches read from (default 0)")
    p.add_argument("--ha", type=int, default=0, metavar="N",
                   help="run PostgreSQL as N >= 3 nodes under Patroni + etcd, with automatic "
                        "failover (default: [ha] nodes, else one server)")
    p.set_defaults(func=_up)
    p = sub.add_parser("status", help="show each component's readiness")
    add_url_arg(p)
    p.set_defaults(func=_status)


