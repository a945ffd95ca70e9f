"""What every client subcommand shares: the gateway URL, the token, the config."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from internal.config import Config, ConfigError, load


def load_config(args: argparse.Namespace) -> Config:
    """The config named by --config (or the default lookup); exits 1 on an error."""
    path = getattr(args, "config", None)
    try:
        return load(Path(path) if path else None)
    except ConfigError as exc:
        raise SystemExit(f"{exc}") from None


def gateway_url(args: argparse.Namespace, cfg: Config) -> str:
    """--url, else $LAKEHOUSE_URL, else the configured gateway address."""
    url = getattr(args, "url", None) or os.environ.get("LAKEHOUSE_URL")
    if url:
        return str(url).rstrip("/")
    return f"http://{cfg.gateway.host}:{cfg.gateway.port}"


def auth_headers(cfg: Config) -> dict[str, str]:
    """A bearer header when the gateway wants one ($LAKEHOUSE_TOKEN or the first configured)."""
    token = os.environ.get("LAKEHOUSE_TOKEN", "").split(",")[0].strip()
    if not token and cfg.gateway.tokens:
        token = cfg.gateway.tokens[0]
    return {"Authorization": f"Bearer {token}"} if token else {}


def add_url_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="gateway URL (default: $LAKEHOUSE_URL, else from config)")
