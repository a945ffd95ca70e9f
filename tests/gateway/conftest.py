"""Fixtures: stub daemons on free ports and a gateway in front of them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from internal.config import Config
from internal.gateway.server import make_app
from tests.gateway.stubs import stub_app
from tests.helpers import serve, url_of, with_section

DAEMONS = ("embedd", "vectord", "matrixd", "syncd", "mcpd")
GatewayFactory = Callable[..., Coroutine[Any, Any, str]]


@pytest.fixture
async def stubs() -> AsyncIterator[dict[str, TestServer]]:
    servers = {name: await serve(stub_app(name)) for name in DAEMONS}
    yield servers
    for server in servers.values():
        await server.close()


@pytest.fixture
async def gateway(stubs: dict[str, TestServer]) -> AsyncIterator[GatewayFactory]:
    """gateway(**gateway_cfg_changes) -> base URL of a gateway over the stubs."""
    started: list[TestServer] = []

    async def start(**changes: Any) -> str:
        fields: dict[str, Any] = {name: (url_of(server),) for name, server in stubs.items()}
        fields.update(changes)
        cfg = with_section(Config(), "gateway", **fields)
        server = await serve(make_app(cfg))
        started.append(server)
        return url_of(server)

    yield start
    for server in started:
        await server.close()
