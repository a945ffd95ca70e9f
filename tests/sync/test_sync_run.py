"""Sync runs against real vectord (embedded PostgreSQL; its document tasks chunk and embed
the pages) and real embedd (local model)."""

from __future__ import annotations

import asyncio
import shutil
import tarfile
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from internal.api.vectord import SearchRequest
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.syncd import send
from internal.vectord.server import make_app as make_vectord
from tests.helpers import require_shared, serve, url_of, with_section
from tests.sync.conftest import (
    LatePort,
    expected_pages,
    make_syncer,
    stored_ids,
    stored_pages,
)


async def test_full_sync_then_edit_delete_and_rerun(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    syncer = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
    want = expected_pages(wiki)
    assert len(want) > 250

    # A full sync stores every page, and nothing ignored.
    first = await syncer.request_run()
    assert first.errors == []
    assert (first.added, first.updated, first.deleted, first.unchanged) == (len(want), 0, 0, 0)
    ids = await stored_ids(vectord, corpus)
    assert stored_pages(ids) == want
    assert "pages/_index.md#0" not in ids and "pages.de/common/..md#0" not in ids
    corpus_info = await vectord.get_corpus(corpus)
    assert corpus_info.dim == 384 and corpus_info.model
    item = await vectord.get_item(corpus, "pages.de/common/7z.md#0")
    assert item.title == "7z"
    assert item.language == "german"
    assert item.metadata == {"title": "7z", "path": "pages.de/common/7z.md",
                                "folder": "pages.de/common", "parent_id": "pages.de/common/7z.md",
                                "language": "german"}
    assert (await vectord.get_item(corpus, "pages/common/7z.md#0")).language == "english"

    # No change: nothing is embedded, nothing sent.
    again = await syncer.request_run()
    assert (again.added, again.updated, again.deleted, again.unchanged) == (0, 0, 0, len(want))
    assert again.embedded_chunks == 0 and again.embed_calls == 0

    # Changing 3 files re-embeds exactly those 3.
    edited = ["pages/common/7z.md", "pages.fr/common/7za.md", "pages.de/common/7zr.md"]
    for rel in edited:
        with (wiki / rel).open("a", encoding="utf-8") as f:
            f.write("\n- Edited by the sync test:\n\n`echo edited`\n")
    third = await syncer.request_run()
    assert third.errors == []
    assert (third.added, third.updated, third.deleted) == (0, 3, 0)
    assert third.unchanged == len(want) - 3 and third.embedded_pages == 3
    assert third.embedded_chunks == 3
    for rel in edited:
        assert "echo edited" in (await vectord.get_item(corpus, f"{rel}#0")).text

    # Deleting 2 removes those 2 and nothing else.
    before = await stored_ids(vectord, corpus)
    gone = ["pages.es/common/7z.md", "pages/linux/a2disconf.md"]
    for rel in gone:
        assert (wiki / rel).exists()
        (wiki / rel).unlink()
    fourth = await syncer.request_run()
    assert (fourth.added, fourth.updated, fourth.deleted) == (0, 0, 2)
    assert fourth.embedded_chunks == 0
    after = await stored_ids(vectord, corpus)
    assert set(before) - set(after) == {f"{rel}#0" for rel in gone}
    assert {k: v for k, v in before.items() if k in after} == after


async def test_page_that_shrinks_loses_its_stale_chunks(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    small = wiki / "small"
    small.mkdir()
    page = small / "guide.md"
    page.write_text("# Guide\n\n" + "\n\n".join(
        f"## Step {i}\n\n" + f"Run the step number {i} carefully. " * 20 for i in range(6)),
        encoding="utf-8")
    syncer = make_syncer(small, corpus, vectord, EmbedClient(session, embedd_url), chunk_chars=800)
    first = await syncer.request_run()
    assert first.errors == [] and first.added == 1
    ids = set(await stored_ids(vectord, corpus))
    assert len(ids) == first.chunks > 2
    assert all(i.startswith("guide.md#") for i in ids)

    page.write_text("# Guide\n\nOne step now.\n", encoding="utf-8")
    second = await syncer.request_run()
    assert (second.updated, second.deleted) == (1, 0)
    assert set(await stored_ids(vectord, corpus)) == {"guide.md#0"}


async def test_unreadable_page_is_kept_and_reported(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    syncer = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
    await syncer.request_run()
    rel = "pages/common/7z.md"
    (wiki / rel).write_bytes(b"# 7z\n\n\xff\xfe not utf-8 \xc3\x28\n")  # read fails
    result = await syncer.request_run()
    assert [e.path for e in result.errors] == [rel]
    assert "cannot read" in result.errors[0].error
    assert result.deleted == 0
    assert f"{rel}#0" in await stored_ids(vectord, corpus)


async def test_embedder_down_the_run_says_so_and_the_next_converges(
        base_cfg: Config, wiki: Path, corpus: str, session: aiohttp.ClientSession,
        embedd_url: str, lone_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vectord that embeds the pages reaches embedd through a port nobody listens on
    at first (the run's own embedd client, which lists the models for the new corpus,
    does): the run's task is acknowledged and waits, the run waits for it a while, then
    ends saying why (the ticker tries again soon); with embedd back, the waiting task
    finishes and the next run converges."""
    monkeypatch.setattr(send, "PATIENCE", 2.0)
    late = LatePort(embedd_url)
    app = make_vectord(with_section(base_cfg, "vectord", dsn=lone_dsn, embedd_url=(late.url,),
                                    tasks=True))
    server = await serve(app)
    try:
        vectord = VectordClient(session, url_of(server))
        syncer = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
        want = expected_pages(wiki)
        broken = await syncer.request_run()
        assert broken.transient and broken.added == 0
        assert [e.path for e in broken.errors] == ["."]
        assert "task_waiting" in broken.errors[0].error and "embedd" in broken.errors[0].error
        await late.open()
        fixed = await syncer.request_run()
        assert fixed.errors == [] and fixed.added == len(want)
        assert stored_pages(await stored_ids(vectord, corpus)) == want
    finally:
        await server.close()
        await late.close()


async def test_runs_never_overlap_and_waiters_share_one_follow_up(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    syncer = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
    active = asyncio.ensure_future(syncer.request_run())
    await asyncio.sleep(0.05)
    assert syncer.running
    # Two on-demand requests while a run is active: both wait, then share one fresh run.
    b, c = await asyncio.gather(syncer.request_run(), syncer.request_run())
    a = await active
    assert a.added > 0
    assert b is c and b is not a
    assert b.unchanged == a.added and b.added == 0
    assert syncer.runs == 2 and not syncer.running


async def test_missing_wiki_dir_deletes_nothing(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    syncer = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
    first = await syncer.request_run()
    shutil.move(wiki, wiki.with_name("moved"))
    result = await syncer.request_run()
    assert result.deleted == 0 and [e.path for e in result.errors] == ["."]
    assert len(await stored_ids(vectord, corpus)) == first.added


async def test_real_tldr_wiki_subset_from_the_archive(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    archive = require_shared("corpora", "tldr-pages.tar.gz")
    root = tmp_path / "tldr"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and (
            m.name.startswith("pages.it/common/a") or m.name.startswith("pages/osx/a"))]
        tar.extractall(root, members=members, filter="data")
    want = expected_pages(root)
    assert 50 < len(want) < 400
    vectord = VectordClient(session, documents_url)
    syncer = make_syncer(root, corpus, vectord, EmbedClient(session, embedd_url), languages={"pages.it": "it", "pages": "en"})
    result = await syncer.request_run()
    assert result.errors == [] and result.added == len(want)
    assert stored_pages(await stored_ids(vectord, corpus)) == want
    first_it = sorted(w for w in want if w.startswith("pages.it"))[0]
    item = await vectord.get_item(corpus, f"{first_it}#0")
    assert item.language == "italian"


async def test_german_page_found_by_german_query_in_lexical_mode(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    syncer = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
    assert (await syncer.request_run()).errors == []
    # Neither word appears in this form on the page ("Verzeichnisstruktur", "behalte"):
    # German stems join them; without stems only a typo's correction does (a guess, said).
    query = SearchRequest(mode="lexical", query_text="Verzeichnisstrukturen behalten", k=5)
    found = await vectord.search(corpus, msgspec.structs.replace(query, language="de"))
    top = found.hits[0]
    assert top.id in {f"pages.de/common/{p}.md#0" for p in ("7z", "7za", "7zr")}
    assert "Verzeichnisstrukturen" not in top.text and top.language == "german"
    assert top.ranks["lexical"] == 1
    assert not found.did_you_mean
    plain = await vectord.search(corpus, msgspec.structs.replace(query, language="simple"))
    assert plain.did_you_mean and "verzeichnisstruktur" in plain.did_you_mean.lower()


async def test_corpus_of_another_model_fails_the_run_up_front(
        wiki: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    await vectord.create_corpus(corpus, 384, model="some-other-model")
    result = await make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url)).request_run()
    assert [e.path for e in result.errors] == ["."]
    assert "model_mismatch" in result.errors[0].error
    assert "does not serve" in result.errors[0].error
    assert result.added == 0 and result.embedded_chunks == 0
    assert await stored_ids(vectord, corpus) == {}


async def test_run_killed_mid_way_loses_nothing_and_next_run_converges(
        wiki: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, documents_url)
    await make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url)).request_run()
    # Edit some pages, delete one, then kill a run once its first task is acknowledged.
    edited = sorted(expected_pages(wiki))[:80]
    for rel in edited:
        with (wiki / rel).open("a", encoding="utf-8") as f:
            f.write("\n- Edited before the crash.\n")
    (wiki / "pages/linux/a2disconf.md").unlink()
    before = len((await _tasks(session, documents_url, corpus))["tasks"])
    crashing = make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url))
    task = asyncio.ensure_future(crashing.request_run())
    for _ in range(60_000):
        if len((await _tasks(session, documents_url, corpus))["tasks"]) > before or task.done():
            break
        await asyncio.sleep(0.01)
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    result = await make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url)).request_run()
    want = expected_pages(wiki)
    assert result.errors == [] and result.deleted == 1
    assert result.updated + result.unchanged == len(want)
    ids = await stored_ids(vectord, corpus)
    assert stored_pages(ids) == want
    for rel in edited:
        assert "Edited before the crash" in (await vectord.get_item(corpus, f"{rel}#0")).text


async def _tasks(session: aiohttp.ClientSession, url: str, corpus: str) -> Any:
    async with session.get(f"{url}/v1/tasks", params={"corpus": corpus, "limit": 100}) as resp:
        assert resp.status == 200
        return await resp.json()
