"""One real stack (`lakehouse up`, auth on, the example wiki to sync) for tests/client.

It holds the README's example corpora, `handbook` and `tickets` (docs/examples), stored
through the client's own text upsert, embedded by the stack's real model.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import lakehouse
from tests.helpers import ROOT
from tests.stack import upstack
from tests.stack.ports import free_port

EXAMPLES = ROOT / "docs" / "examples"
CORPORA = ("handbook", "tickets")  # the README's example names them


@dataclass(frozen=True)
class Live:
    url: str
    token: str


def example_items(corpus: str) -> list[lakehouse.Item]:
    """docs/examples/<corpus>.jsonl as items (`_id` is the id)."""
    lines = (EXAMPLES / f"{corpus}.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines if line.strip()]
    return [lakehouse.Item(id=d["_id"], text=d["text"], title=d.get("title"),
                           tags=d.get("tags", []), metadata=d.get("metadata", {}))
            for d in docs]


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    wiki = Path(tempfile.mkdtemp(prefix="lakehouse-client-wiki-")) / "wiki"
    shutil.copytree(EXAMPLES / "wiki", wiki)
    token = f"t-{uuid.uuid4().hex}"
    stack = upstack.start("lakehouse-client-test-", {
        "LAKEHOUSE_TOKEN": token, "LAKEHOUSE_MCPD_PORT": str(free_port()),
        "LAKEHOUSE_SYNC_WIKI_DIR": str(wiki), "LAKEHOUSE_SYNC_CORPUS": "wiki",
        "LAKEHOUSE_SYNC_INTERVAL": "3600"})
    try:
        with lakehouse.Client(stack.url, token) as client:
            for corpus in CORPORA:
                client.create_corpus(corpus)
                client.upsert(corpus, example_items(corpus))
        yield Live(stack.url, token)
    finally:
        stack.stop()
        shutil.rmtree(stack.tmp, ignore_errors=True)
        shutil.rmtree(wiki.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def client(live: Live) -> Iterator[lakehouse.Client]:
    with lakehouse.Client(live.url, live.token) as c:
        yield c


@pytest.fixture
async def aclient(live: Live) -> AsyncIterator[lakehouse.AsyncClient]:
    async with lakehouse.AsyncClient(live.url, live.token) as c:
        yield c
