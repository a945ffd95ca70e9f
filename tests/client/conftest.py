"""One real stack (`lakehouse up`, auth on, the example wiki to sync) for tests/client.

It holds the README's example corpora, `handbook` and `tickets` (docs/examples), stored
through the client's own text upsert, embedded by the stack's real model.

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
from tests.helpers import ROOT
from tests.stack import upstack
from tests.stack.ports import free_port

EXAMPLES = ROOT / "docs" / "examples"
CORPORA = ("handbook", "tickets")  # the README's example names them


def unknown_fields(value: object, t: mi.Type, path: str = "") -> list[str]:
    """The keys of a decoded JSON value that its type has no field for (recursively)."""
    if isinstance(t, mi.StructType):
        if not isinstance(value, dict):
            return []
        fields = {f.encode_name: f.type for f in t.fields}
        out = [f"{path}.{k}" for k in value if k not in fields]
        for k, v in value.items():
            if k in fields:
                out += unknown_fields(v, fields[k], f"{path}.{k}")
        return out
    if isinstance(t, mi.ListType | mi.VarTupleType) and isinstance(value, list):
        return [u for i, v in enumerate(value) for u in unknown_fields(v, t.item_type,
                                                                        f"{path}[{i}]")]
    if isinstance(t, mi.DictType) and isinstance(value, dict):
        return [u for k, v in value.items() for u in unknown_fields(v, t.value_type,
                                                                     f"{path}.{k}")]
    if isinstance(t, mi.UnionType):  # the member that fits best
        found = [unknown_fields(value, m, path) for m in t.types]
        return min(found, key=len) if found else []
    return []


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
