"""Lakehouse configuration: lakehouse.toml read once into frozen dataclasses.

Order of precedence: built-in defaults < lakehouse.toml < LAKEHOUSE_* environment.
An unknown key, a wrong type or a contradictory pair raises ConfigError naming the
key; every daemon's main turns that into one line and exit code 78 (EX_CONFIG, which
`lakehouse up` does not restart), a command into exit code 1.
"""

from __future__ import annotations

from internal.config.loader import ConfigError, load, load_or_exit, redacted
from internal.config.sections import (
    Config,
    EmbeddConfig,
    GatewayConfig,
    LogConfig,
    MatrixdConfig,
    McpdConfig,
    SyncConfig,
    VectordConfig,
)

__all__ = [
    "Config",
    "ConfigError",
    "EmbeddConfig",
    "GatewayConfig",
    "LogConfig",
    "MatrixdConfig",
    "McpdConfig",
    "SyncConfig",
    "VectordConfig",
    "load",
    "load_or_exit",
    "redacted",
]
