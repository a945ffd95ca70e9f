"""One real stack (`lakehouse up`, auth on, the example wiki to sync) for tests/client.

It holds the README's example corpora, `handbook` and `tickets` (docs/examples), added as
documents (as `lakehouse ingest` adds them: a chunk per section, `<id>#0` for these short
ones), chunked and embedded by the stack with its real model.

Every answer the client decodes in these tests is also checked field by field against
its struct in lakehouse.wire.responses (clients/python): a field the daemons send that the struct lacks
(msgspec would drop it silently) fails the test that received it. The tests cover every
route the client wraps, so the structs cannot drift from what the daemons send.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import msgspec.inspect as mi
import pytest

import lakehouse
from lakehouse import _transport
from lakehouse.wire.documents import DocumentIn
from tests.helpers import ROOT
from tests.stack import upstack
from tests.stack.ports import free_port
from tests.wire_drift import unknown_fields

EXAMPLES = ROOT / "docs" / "examples"
CORPORA = ("handbook", "tickets")  # the README's example names them


DRIFT: list[str] = []


@pytest.fixture(autouse=True)
def no_drift(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail a test whose answers carried a field their response struct does not have."""
    decode = _transport._decode

    def checked(raw: bytes, response: type, method: str, path: str) -> object:
        got = decode(raw, response, method, path)
        name = getattr(response, "__name__", repr(response))
        missing = unknown_fields(msgspec.json.decode(raw), mi.type_info(response))
        DRIFT.extend(f"{method} {path}: {name} lacks {m}" for m in missing)
        return got

    DRIFT.clear()
    monkeypatch.setattr(_transport, "_decode", checked)
    yield
    assert not DRIFT, "response structs drifted from what the daemons send:\n" + "\n".join(
        sorted(set(DRIFT)))


@dataclass(frozen=True)
class Live:
    url: str
    token: str


def example_documents(corpus: str) -> list[DocumentIn]:
    """docs/examples/<corpus>.jsonl as documents (`_id` is the id)."""
    lines = (EXAMPLES / f"{corpus}.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines if line.strip()]
    return [DocumentIn(id=d["_id"], text=d["text"], title=d.get("title"),
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
                [task] = client.add_documents(corpus, example_documents(corpus), wait=True)
                assert task.state == "succeeded", task
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
