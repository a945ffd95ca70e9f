"""Sync test plumbing: a copy of the tldr fixture wiki and a Syncer on real daemons."""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from internal.clients.embed import EmbedClient, Embedding
from internal.clients.vectord import VectordClient
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

    async def embed(self, texts: list[str], input_type: str = "document",
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
    return {str(r["id"]): str(r["content_hash"]) async for r in vectord.iter_ids(corpus)}


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
    settings = SyncSettings(wiki_dir=wiki, corpus=corpus, ignore=IGNORE,
                            languages=dict(LANGUAGES), batch_size=32, chunk_chars=2000)
    return Syncer(dataclasses.replace(settings, **changes), vectord, embed)
