"""Helpers for tests: shared data paths, config tweaks, in-process servers."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from internal.config import Config

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def shared_dir() -> Path:
    return Path(os.environ.get("LAKEHOUSE_DATA") or ROOT.parent / "shared")


def require_shared(*parts: str) -> Path:
    """A path under ../shared; absent data skips with a reason, or fails under CI."""
    path = shared_dir().joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"data absent under CI: {path}")
        pytest.skip(f"not run: data absent ({path})")
    return path


def with_section(cfg: Config, section: str, **changes: Any) -> Config:
    """A copy of cfg with some fields of one section changed."""
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **changes)})


async def serve(app: web.Application) -> TestServer:
    """Start an app on a free loopback port (the caller closes it)."""
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    return server


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")
