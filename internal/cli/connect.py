"""What every client subcommand shares: the gateway URL, the token, the config."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from internal.config import Config, ConfigError, load


def load_config(args: argparse.Namespace) -> Config:
    """The config named by --config (or the default lookup); exits 1 on an error."""
    path = getattr(args, "config", None)
    try:
        return load(Path(path) if path else None)
    except ConfigError as exc:
        raise SystemExit(f"{exc}") from None


def resolve_url(url: str | None, config: Callable[[], Config]) -> str:
    """url, else $LAKEHOUSE_URL, else the configured gateway address (config read only then)."""
    url = url or os.environ.get("LAKEHOUSE_URL")
    if url:
        return str(url).rstrip("/")
    cfg = config()
    return f"http://{cfg.gateway.host}:{cfg.gateway.port}"


def resolve_token(token: str | None, config: Callable[[], Config]) -> str:
    """token ("": none), else the first of $LAKEHOUSE_TOKEN, else the first configured
    one, else ""."""
    if token is not None:
        return token
    token = os.environ.get("LAKEHOUSE_TOKEN", "").split(",")[0].strip()
    if token:
        return token
    tokens = config().gateway.tokens
    return tokens[0] if tokens else ""


def gateway_url(args: argparse.Namespace, cfg: Config) -> str:
    """--url, else $LAKEHOUSE_URL, else the configured gateway address."""
    return resolve_url(getattr(args, "url", None), lambda: cfg)


def auth_headers(cfg: Config) -> dict[str, str]:
    """A bearer header when the gateway wants one ($LAKEHOUSE_TOKEN or the first configured)."""
    token = resolve_token(None, lambda: cfg)
    return {"Authorization": f"Bearer {token}"} if token else {}


def add_url_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="gateway URL (default: $LAKEHOUSE_URL, else from config)")
