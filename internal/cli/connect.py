"""What every client subcommand shares: the gateway URL, the token, the config, and
running the command against the gateway (`run_command`).

The URL and token are found as the Python client finds them (lakehouse._connect: the
flag, the environment, else `[gateway]` of the --config file), so a command that only
talks to the gateway never loads the server's config module."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from internal.cli import session as session_state
from internal.cli.ingest_input import InputError
from internal.cli.output import describe_error
from lakehouse._connect import resolve_token, resolve_url
from lakehouse.errors import CONNECTION_LOST, TIMEOUT, UNREACHABLE, LakehouseError
from lakehouse.lsn import REQUEST_LSN, WRITTEN, format_lsn

if TYPE_CHECKING:
    from internal.config import Config
    from lakehouse import AsyncClient

CALL_TIMEOUT = 30.0  # seconds per request of a command (ingest: its --timeout)


def load_config(args: argparse.Namespace) -> Config:
    """The config named by --config (or the default lookup); exits 1 on an error."""
    from pathlib import Path

    from internal.config import ConfigError, load

    path = getattr(args, "config", None)
    try:
        return load(Path(path) if path else None)
    except ConfigError as exc:
        raise SystemExit(f"{exc}") from None


def gateway_url(args: argparse.Namespace) -> str:
    """--url, else $LAKEHOUSE_URL, else the configured gateway address."""
    try:
        return resolve_url(getattr(args, "url", None), getattr(args, "config", None))
    except ValueError as exc:
        raise SystemExit(f"{exc}") from None


def gateway_token(args: argparse.Namespace) -> str:
    """The first of $LAKEHOUSE_TOKEN, else the first configured token, else "" (none)."""
    try:
        return resolve_token(None, getattr(args, "config", None))
    except ValueError as exc:
        raise SystemExit(f"{exc}") from None


def auth_headers(args: argparse.Namespace) -> dict[str, str]:
    """A bearer header when the gateway wants one (gateway_token)."""
    token = gateway_token(args)
    return {"Authorization": f"Bearer {token}"} if token else {}


def add_url_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="gateway URL (default: $LAKEHOUSE_URL, else from config)")


def run_command(args: argparse.Namespace, work: Callable[[AsyncClient], Awaitable[int]], *,
                timeout: float = CALL_TIMEOUT, retries: int = 3, max_wait: float = 60.0) -> int:
    """Run one command against the gateway through the client; errors become one line and
    exit code 1. `retries`: attempts after a 503 or a refused connection, `max_wait`:
    seconds of 429s waited out per call (the client's)."""
    from lakehouse import AsyncClient

    base, token = gateway_url(args), gateway_token(args)

    async def go() -> int:
        # Read-your-writes across commands (internal/cli/session.py): the last write
        # position goes with every request; this command's writes update it.
        REQUEST_LSN.set(session_state.recent_lsn(base))
        written: list[int] = []
        WRITTEN.set(written)
        try:
            async with AsyncClient(base, token, timeout=timeout, retries=retries,
                                   max_wait=max_wait) as client:
                return await work(client)
        finally:
            if written:
                session_state.remember_lsn(base, format_lsn(max(written)))

    try:
        return asyncio.run(go())
    except LakehouseError as exc:
        if exc.code in (UNREACHABLE, CONNECTION_LOST):
            print(f"error: cannot reach Lakehouse at {base} (is `lakehouse up` running?)",
                  file=sys.stderr)
        elif exc.code == TIMEOUT:
            print(f"error: timed out: {exc.message}", file=sys.stderr)
        else:
            print(f"error: {describe_error(exc)}", file=sys.stderr)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
    return 1
