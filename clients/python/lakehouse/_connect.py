"""Where the client connects and with which token, when the caller does not say: the
environment, else the `[gateway]` table of lakehouse.toml (the file the stack reads:
$LAKEHOUSE_CONFIG, else ./lakehouse.toml), else the stack's default address.

Only `[gateway] host`, `port` and `tokens` are read, and their LAKEHOUSE_GATEWAY_*
overrides, so the client needs nothing of the server; the stack checks the whole file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

DEFAULT_HOST = "127.0.0.1"  # must match [gateway] host's default in internal.config
DEFAULT_PORT = 3210  # must match [gateway] port's default in internal.config


def gateway_table(config_file: str | Path | None = None,
                  env: Mapping[str, str] | None = None) -> Mapping[str, Any]:
    """The `[gateway]` table of the config file (`config_file`, else $LAKEHOUSE_CONFIG,
    else ./lakehouse.toml when present); empty when there is none."""
    env = os.environ if env is None else env
    path = Path(config_file or env.get("LAKEHOUSE_CONFIG") or "lakehouse.toml")
    if not config_file and not env.get("LAKEHOUSE_CONFIG") and not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            table = tomllib.load(fh).get("gateway", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"config error: {path}: {exc}") from None
    return table if isinstance(table, Mapping) else {}


def resolve_url(url: str | None, config_file: str | Path | None = None,
                env: Mapping[str, str] | None = None) -> str:
    """url, else $LAKEHOUSE_URL, else the configured gateway address (file read only then)."""
    env = os.environ if env is None else env
    url = url or env.get("LAKEHOUSE_URL")
    if url:
        return str(url).rstrip("/")
    table = gateway_table(config_file, env)
    host = env.get("LAKEHOUSE_GATEWAY_HOST") or table.get("host") or DEFAULT_HOST
    port = env.get("LAKEHOUSE_GATEWAY_PORT") or table.get("port") or DEFAULT_PORT
    return f"http://{host}:{port}"


def resolve_token(token: str | None, config_file: str | Path | None = None,
                  env: Mapping[str, str] | None = None) -> str:
    """token ("": none), else the first of $LAKEHOUSE_TOKEN, else the first configured
    one ($LAKEHOUSE_GATEWAY_TOKENS or `[gateway] tokens`), else ""."""
    if token is not None:
        return token
    env = os.environ if env is None else env
    for name in ("LAKEHOUSE_TOKEN", "LAKEHOUSE_GATEWAY_TOKENS"):
        first = env.get(name, "").split(",")[0].strip()
        if first:
            return first
    tokens = gateway_table(config_file, env).get("tokens") or []
    return str(tokens[0]) if isinstance(tokens, list) and tokens else ""
