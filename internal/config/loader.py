"""Reads lakehouse.toml and LAKEHOUSE_* overrides into a frozen Config."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from internal.config.sections import RENAMED_KEYS, SECRET_KEYS, Config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Short aliases users expect; the generic form is LAKEHOUSE_<SECTION>_<KEY>.
ENV_ALIASES = {
    "LAKEHOUSE_PG_DSN": ("vectord", "dsn"),
    "LAKEHOUSE_TOKEN": ("gateway", "tokens"),
}
# Settings that name a path. A relative one is taken from the folder of what gave it: the
# config file's folder for the file's value (and the defaults), the folder the command runs
# in for an environment variable's (as a shell reads `VAR=docs/wiki cmd`).
PATH_KEYS = {("vectord", "data_dir"), ("sync", "wiki_dir"), ("backup", "wal_dir"), ("ha", "data_dir")}


class ConfigError(Exception):
    """A setting that is unknown, of the wrong type, or contradicts another."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"config error: {key}: {reason}")
        self.key = key


def _coerce(key: str, hint: Any, value: Any) -> Any:
    """Check a TOML value against a field's type; convert lists to tuples."""
    origin = typing.get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        if isinstance(value, str):  # one string is a list of one ("" of none)
            return (value,) if value else ()
        raise ConfigError(key, f"expected a list of strings, got {json.dumps(value, default=str)}")
    elif origin is dict:
        if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
            return dict(value)
        raise ConfigError(key, f"expected a table of strings, got {json.dumps(value, default=str)}")
    expected = getattr(hint, "__name__", str(hint))
    raise ConfigError(key, f"expected {expected}, got {json.dumps(value, default=str)}")


def _parse_env(key: str, hint: Any, raw: str) -> Any:
    """Turn an environment string into the TOML-ish value _coerce expects."""
    origin = typing.get_origin(hint)
    try:
        if hint is bool:
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if origin is tuple:
            return [part.strip() for part in raw.split(",") if part.strip()]
        if origin is dict:
            parsed = json.loads(raw)
            return parsed
    except ValueError:
        expected = getattr(hint, "__name__", str(hint))
        raise ConfigError(key, f"expected {expected}, got {json.dumps(raw)}") from None
    return raw


def _renamed(section: str, table: Mapping[str, Any], env: Mapping[str, str]
             ) -> tuple[dict[str, Any], dict[str, str], list[tuple[str, str]]]:
    """The section's table and environment with each renamed key under its new name (the
    new name given wins), and the renamed keys used, as (old, new) dotted names."""
    table, env = dict(table), dict(env)
    used: list[tuple[str, str]] = []
    for (where, old), new in RENAMED_KEYS.items():
        if where != section:
            continue
        old_env, new_env = f"LAKEHOUSE_{section}_{old}".upper(), f"LAKEHOUSE_{section}_{new}".upper()
        if old in table:
            used.append((f"{section}.{old}", f"{section}.{new}"))
            table.setdefault(new, table[old])
            del table[old]
        if old_env in env:
            used.append((old_env, new_env))
            env.setdefault(new_env, env[old_env])
    return table, env, used


def _build(raw: Mapping[str, Any], env: Mapping[str, str], base_dir: Path) -> Config:
    sections: dict[str, Any] = {}
    renamed: list[tuple[str, str]] = []
    top_hints = {name: hint for name, hint in typing.get_type_hints(Config).items()
                 if name != "renamed"}  # the sections
    for name in raw:
        if name not in top_hints:
            raise ConfigError(name, "unknown section")
    all_env = env
    for section_name, section_cls in top_hints.items():
        table = raw.get(section_name, {})
        if not isinstance(table, Mapping):
            raise ConfigError(section_name, "expected a table")
        table, env, used = _renamed(section_name, table, all_env)
        renamed += used
        hints = typing.get_type_hints(section_cls)
        for key in table:
            if key not in hints:
                raise ConfigError(f"{section_name}.{key}", "unknown key")
        values: dict[str, Any] = {}
        for fname, hint in hints.items():
            dotted = f"{section_name}.{fname}"
            env_name = f"LAKEHOUSE_{section_name}_{fname}".upper()
            value: Any = dataclasses.MISSING
            origin = base_dir
            if fname in table:
                value = table[fname]
            for alias, target in ENV_ALIASES.items():
                if target == (section_name, fname) and alias in env:
                    value, origin = _parse_env(dotted, hint, env[alias]), Path.cwd()
            if env_name in env:
                value, origin = _parse_env(dotted, hint, env[env_name]), Path.cwd()
            if value is dataclasses.MISSING:
                continue
            value = _coerce(dotted, hint, value)
            if (section_name, fname) in PATH_KEYS and value and not Path(value).is_absolute():
                value = str((origin / value).resolve())
            values[fname] = value
        obj = section_cls(**values)
        for fname in (f.name for f in dataclasses.fields(section_cls)):
            if (section_name, fname) in PATH_KEYS and fname not in values:
                default = getattr(obj, fname)
                if default and not Path(default).is_absolute():
                    obj = dataclasses.replace(obj, **{fname: str((base_dir / default).resolve())})
        try:
            obj.validate()
        except ValueError as exc:
            key, _, reason = str(exc).partition(": ")
            raise ConfigError(f"{section_name}.{key}", reason) from None
        sections[section_name] = obj
    return Config(**sections, renamed=tuple(renamed))


def config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The file to read: $LAKEHOUSE_CONFIG, else ./lakehouse.toml when present."""
    env = os.environ if env is None else env
    explicit = env.get("LAKEHOUSE_CONFIG")
    if explicit:
        return Path(explicit)
    local = Path("lakehouse.toml")
    return local if local.exists() else None


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read the config file (if any) and the environment into a Config."""
    env = os.environ if env is None else env
    path = path if path is not None else config_path(env)
    raw: dict[str, Any] = {}
    base_dir = Path.cwd()
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(str(path), "file not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(str(path), f"invalid TOML: {exc}") from None
        base_dir = path.resolve().parent
    return _build(raw, env, base_dir)


def load_or_exit(path: Path | None = None) -> Config:
    """load(), or print the error and exit with code 1 (for daemon mains)."""
    try:
        return load(path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from None


def redacted(cfg: Config) -> dict[str, Any]:
    """The config as a dict with secrets replaced, for the start-up log line."""
    out = dataclasses.asdict(cfg)
    for dotted in SECRET_KEYS:
        section, key = dotted.split(".")
        if out[section].get(key):
            out[section][key] = "***"
    return out
