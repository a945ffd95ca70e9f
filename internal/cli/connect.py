"""What every client subcommand shares: the gateway URL, the token, the config.

The URL and token are found as the Python client finds them (lakehouse._connect: the
flag, the environment, else `[gateway]` of the --config file), so a command that only
talks to the gateway never loads the server's config module."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from lakehouse._connect import resolve_token, resolve_url

if TYPE_CHECKING:
    from internal.config import Config


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
