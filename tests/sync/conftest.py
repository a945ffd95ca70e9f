"""Sync test plumbing: a copy of the tldr fixture wiki and a Syncer on real daemons."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import aiohttp
import pytest

from internal.clients.embed import EmbedClient, Embedding
from internal.clients.vectord import VectordClient
from internal.embedd.local import MODEL_ID as MINILM
from internal.syncd.pages import is_ignored, is_page
from internal.syncd.runner import Syncer, SyncSettings
from tests.helpers import FIXTURES

TLDR = FIXTURES / "tldr"
IGNORE = ("_index.md", ".*")
# Part of the wiki is mapped; the rest (pages, pages.fr, ...) is detected.
LANGUAGES = {"pages.de": "de", "pages.zh": "simple", "pages.ja": "simple"}


class CountingEmbed(EmbedClient):
    """The real embedd client, recording what it is asked to embed (no model mocking)."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        super().__init__(session, base_url)
        self.texts: list[str] = []
        self.calls = 0

    async def embed(self, texts: list[str], input_type: Literal["query", "document"] = "document",
                    model: str | None = None) -> Embedding:
        self.calls += 1
        self.texts.extend(texts)
        return await super().embed(texts, input_type=input_type, model=model)

    def reset(self) -> None:
        self.texts.clear()
        self.calls = 0


def expected_pages(root: Path, ignore: tuple[str, ...] = IGNORE) -> set[str]:
    """Every page the sync should store: .md files not matched by the ignore globs."""
    out = set()
    for f in root.rglob("*"):
        rel = f.relative_to(root).as_posix()
        if f.is_file() and is_page(f.name) and not is_ignored(rel, ignore):
            out.add(rel)
    return out


async def stored_ids(vectord: VectordClient, corpus: str) -> dict[str, str]:
    return {r.id: r.content_hash async for r in vectord.iter_ids(corpus)}


def stored_pages(ids: dict[str, str]) -> set[str]:
    return {i.rpartition("#")[0] for i in ids}


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    """A fresh copy of the committed tldr pages (plus an _index.md that must be ignored)."""
    root = tmp_path / "wiki"
    shutil.copytree(TLDR, root)
    (root / "pages" / "_index.md").write_text("# Index\n\nAll the pages.\n", encoding="utf-8")
    return root


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
def corpus() -> str:
    return f"wiki_{uuid.uuid4().hex[:10]}"


def make_syncer(wiki: Path, corpus: str, vectord: VectordClient, embed: EmbedClient,
                **changes: Any) -> Syncer:
    # MiniLM, as a new stack's default: the fixture wiki's languages would choose the
    # multilingual model (tests/sync/test_model_choice.py), at twice the CPU a chunk.
    settings = SyncSettings(wiki_dir=wiki, corpus=corpus, ignore=IGNORE,
                            languages=dict(LANGUAGES), batch_size=32, chunk_chars=2000,
                            model=MINILM)
    return Syncer(dataclasses.replace(settings, **changes), vectord, embed)


class LatePort:
    """A loopback port where a daemon appears late: nothing listens until `open()`, then
    every connection is piped to the real daemon at `target` (byte for byte)."""

    def __init__(self, target: str) -> None:
        self.target = target.split("://", 1)[-1].rstrip("/")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def open(self) -> None:
        host, port = self.target.rsplit(":", 1)

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            self.writers.update((writer, up_writer))
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        self.server = await asyncio.start_server(client, "127.0.0.1", self.port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in self.writers:
                writer.close()
            await self.server.wait_closed()


def tiny_wiki(root: Path) -> Path:
    """Two pages."""
    root.mkdir()
    for name in ("alpha", "beta"):
        (root / f"{name}.md").write_text(f"# {name}\n\nThe {name} page of a tiny wiki.\n",
                                         encoding="utf-8")
    return root
