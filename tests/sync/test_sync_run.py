"""Sync runs against real vectord (embedded PostgreSQL) and real embedd (local model)."""

from __future__ import annotations

import asyncio
import shutil
import tarfile
from pathlib import Path
from typing import Literal

import aiohttp
import msgspec

from internal.api.vectord import SearchRequest
from internal.clients.embed import Embedding
from internal.clients.vectord import VectordClient
from internal.common.upstream import Upstream
from tests.helpers import require_shared
from tests.sync.conftest import (
    CountingEmbed,
    expected_pages,
    make_syncer,
    stored_ids,
    stored_pages,
)


async def test_full_sync_then_edit_delete_and_rerun(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    embed = CountingEmbed(session, embedd_url)
    syncer = make_syncer(wiki, corpus, vectord, embed)
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

    # No change: nothing is embedded.
    embed.reset()
    again = await syncer.request_run()
    assert (again.added, again.updated, again.deleted, again.unchanged) == (0, 0, 0, len(want))
    assert embed.calls == 0 and again.embed_calls == 0

    # Changing 3 files re-embeds exactly those 3.
    edited = ["pages/common/7z.md", "pages.fr/common/7za.md", "pages.de/common/7zr.md"]
    for rel in edited:
        with (wiki / rel).open("a", encoding="utf-8") as f:
            f.write("\n- Edited by the sync test:\n\n`echo edited`\n")
    embed.reset()
    third = await syncer.request_run()
    assert third.errors == []
    assert (third.added, third.updated, third.deleted) == (0, 3, 0)
    assert third.unchanged == len(want) - 3 and third.embedded_pages == 3
    assert len(embed.texts) == 3 and all("Edited by the sync test" in t for t in embed.texts)
    assert "echo edited" in (await vectord.get_item(corpus, "pages/common/7z.md#0")).text

    # Deleting 2 removes those 2 and nothing else.
    before = await stored_ids(vectord, corpus)
    gone = ["pages.es/common/7z.md", "pages/linux/a2disconf.md"]
    for rel in gone:
        assert (wiki / rel).exists()
        (wiki / rel).unlink()
    embed.reset()
    fourth = await syncer.request_run()
    assert (fourth.added, fourth.updated, fourth.deleted) == (0, 0, 2)
    assert embed.calls == 0
    after = await stored_ids(vectord, corpus)
    assert set(before) - set(after) == {f"{rel}#0" for rel in gone}
    assert {k: v for k, v in before.items() if k in after} == after


async def test_page_that_shrinks_loses_its_stale_chunks(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    embed = CountingEmbed(session, embedd_url)
    small = wiki / "small"
    small.mkdir()
    page = small / "guide.md"
    page.write_text("# Guide\n\n" + "\n\n".join(
        f"## Step {i}\n\n" + f"Run the step number {i} carefully. " * 20 for i in range(6)),
        encoding="utf-8")
    syncer = make_syncer(small, corpus, vectord, embed, chunk_chars=800)
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
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    syncer = make_syncer(wiki, corpus, vectord, CountingEmbed(session, embedd_url))
    await syncer.request_run()
    rel = "pages/common/7z.md"
    (wiki / rel).write_bytes(b"# 7z\n\n\xff\xfe not utf-8 \xc3\x28\n")  # read fails
    result = await syncer.request_run()
    assert [e.path for e in result.errors] == [rel]
    assert "cannot read" in result.errors[0].error
    assert result.deleted == 0
    assert f"{rel}#0" in await stored_ids(vectord, corpus)


async def test_embedder_outage_mid_run_then_next_run_converges(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    """embedd 'goes down' after two batches: its URL flips to a port nobody listens on."""
    vectord = VectordClient(session, vectord_url)
    embed = CountingEmbed(session, embedd_url)
    dead = await _dead_url()

    class Outage(CountingEmbed):
        async def embed(self, texts: list[str], input_type: Literal["query", "document"] = "document",
                        model: str | None = None) -> Embedding:
            if self.calls >= 2:
                self.upstream = Upstream("embedd", (dead,), 5.0)
            return await super().embed(texts, input_type=input_type, model=model)

    flaky = Outage(session, embedd_url)
    syncer = make_syncer(wiki, corpus, vectord, flaky, batch_size=32)
    want = expected_pages(wiki)
    broken = await syncer.request_run()
    failed = {e.path for e in broken.errors}
    assert broken.added > 0 and failed  # two batches made it, the rest failed
    assert broken.embed_calls > 2
    assert all("embedd_unavailable" in e.error for e in broken.errors)
    stored = stored_pages(await stored_ids(vectord, corpus))
    assert stored == want - failed  # every page either stored or reported

    # embedd is back: the next run embeds only what failed and converges.
    syncer.embed = embed
    fixed = await syncer.request_run()
    assert fixed.errors == []
    assert (fixed.added, fixed.unchanged) == (len(failed), broken.added)
    assert len(embed.texts) == len(failed)
    assert stored_pages(await stored_ids(vectord, corpus)) == want


async def test_runs_never_overlap_and_waiters_share_one_follow_up(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    syncer = make_syncer(wiki, corpus, vectord, CountingEmbed(session, embedd_url))
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
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    syncer = make_syncer(wiki, corpus, vectord, CountingEmbed(session, embedd_url))
    first = await syncer.request_run()
    shutil.move(wiki, wiki.with_name("moved"))
    result = await syncer.request_run()
    assert result.deleted == 0 and [e.path for e in result.errors] == ["."]
    assert len(await stored_ids(vectord, corpus)) == first.added


async def test_real_tldr_wiki_subset_from_the_archive(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    archive = require_shared("corpora", "tldr-pages.tar.gz")
    root = tmp_path / "tldr"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and (
            m.name.startswith("pages.it/common/a") or m.name.startswith("pages/osx/a"))]
        tar.extractall(root, members=members, filter="data")
    want = expected_pages(root)
    assert 50 < len(want) < 400
    vectord = VectordClient(session, vectord_url)
    syncer = make_syncer(root, corpus, vectord, CountingEmbed(session, embedd_url),
                         languages={"pages.it": "it", "pages": "en"})
    result = await syncer.request_run()
    assert result.errors == [] and result.added == len(want)
    assert stored_pages(await stored_ids(vectord, corpus)) == want
    first_it = sorted(w for w in want if w.startswith("pages.it"))[0]
    item = await vectord.get_item(corpus, f"{first_it}#0")
    assert item.language == "italian"


async def _dead_url() -> str:
    """A loopback URL on which nothing listens (the port was just free)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


async def test_german_page_found_by_german_query_in_lexical_mode(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    syncer = make_syncer(wiki, corpus, vectord, CountingEmbed(session, embedd_url))
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
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    await vectord.create_corpus(corpus, 384, model="some-other-model")
    embed = CountingEmbed(session, embedd_url)
    result = await make_syncer(wiki, corpus, vectord, embed).request_run()
    assert [e.path for e in result.errors] == ["."]
    assert "model_mismatch" in result.errors[0].error
    assert embed.calls == 0 and result.added == 0
    assert await stored_ids(vectord, corpus) == {}


async def test_run_killed_mid_way_loses_nothing_and_next_run_converges(
        wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    vectord = VectordClient(session, vectord_url)
    embed = CountingEmbed(session, embedd_url)
    first = make_syncer(wiki, corpus, vectord, embed)
    await first.request_run()
    # Edit some pages, delete one, then kill a run after its second embedding call.
    edited = sorted(expected_pages(wiki))[:80]
    for rel in edited:
        with (wiki / rel).open("a", encoding="utf-8") as f:
            f.write("\n- Edited before the crash.\n")
    (wiki / "pages/linux/a2disconf.md").unlink()
    embed.reset()
    crashing = make_syncer(wiki, corpus, vectord, embed)
    task = asyncio.ensure_future(crashing.request_run())
    for _ in range(60_000):
        if embed.calls >= 2 or task.done():
            break
        await asyncio.sleep(0.01)
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    after = make_syncer(wiki, corpus, vectord, CountingEmbed(session, embedd_url))
    result = await after.request_run()
    want = expected_pages(wiki)
    assert result.errors == [] and result.deleted == 1
    assert result.updated + result.unchanged == len(want)
    assert 0 < result.updated <= 80
    ids = await stored_ids(vectord, corpus)
    assert stored_pages(ids) == want
    for rel in edited:
        assert "Edited before the crash" in (await vectord.get_item(corpus, f"{rel}#0")).text
