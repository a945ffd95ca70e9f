"""The languages synced pages are stored in, and what a search by their words finds.

Real vectord (embedded PostgreSQL) and embedd (local model), small wikis copied from the
tldr fixture: short pages full of commands, where lingua's word alone stored English
pages as Danish or Portuguese and Chinese ones as anything but Chinese.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import aiohttp

from internal.api.vectord import SearchRequest
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.syncd.runner import Syncer, SyncSettings
from tests.sync.conftest import TLDR

# English pages of the fixture: the two lingua called Danish and Portuguese, the pages the
# questions want, and enough others for the folder's language to be known.
ENGLISH = ["break", "tty", "tar", "find", "du", "7z", "7za", "alias", "arch", "base32",
           "base64", "basename", "bash", "bat", "aspell", "age"]


def small_wiki(tmp: Path, pages: dict[str, list[str]]) -> Path:
    """A wiki of the fixture's pages: {fixture folder: page names} laid out flat."""
    root = tmp / "wiki"
    root.mkdir()
    for folder, names in pages.items():
        for name in names:
            shutil.copy(TLDR / folder / f"{name}.md", root / f"{name}.md")
    return root


def syncer(root: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str,
           embedd_url: str, languages: dict[str, str] | None = None) -> Syncer:
    settings = SyncSettings(wiki_dir=root, corpus=corpus, languages=languages or {},
                            batch_size=32)
    return Syncer(settings, VectordClient(session, documents_url), EmbedClient(session, embedd_url))


async def languages_of(vectord: VectordClient, corpus: str) -> dict[str, str]:
    out = {}
    async for row in vectord.iter_ids(corpus):
        item = await vectord.get_item(corpus, row.id)
        out[row.id.rpartition("#")[0]] = str(item.language)
    return out


async def lexical(vectord: VectordClient, corpus: str, question: str, k: int = 3) -> list[str]:
    found = await vectord.search(corpus, SearchRequest(mode="lexical", query_text=question, k=k))
    return [h.id.rpartition("#")[0] for h in found.hits]


async def test_english_pages_stay_english_and_are_found_by_a_question_with_stop_words(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str,
        embedd_url: str) -> None:
    root = small_wiki(tmp_path, {"pages/common": ENGLISH})
    run = await syncer(root, corpus, session, documents_url, embedd_url).request_run()
    assert run.errors == []
    vectord = VectordClient(session, documents_url)
    langs = await languages_of(vectord, corpus)
    assert set(langs.values()) == {"english"}, langs
    # "a" (seven times in break.md's examples), "do", "i" and "of" are stop words of the
    # question: they must not make break.md an answer.
    got = await lexical(vectord, corpus, "how do I show the disk usage of a directory")
    assert got[0] == "du.md" and "break.md" not in got, got
    assert (await lexical(vectord, corpus, "find files by name recursively"))[0] == "find.md"


async def test_a_page_told_another_language_does_not_score_on_the_questions_stop_words(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str,
        embedd_url: str) -> None:
    root = small_wiki(tmp_path, {"pages/common": ENGLISH})
    # A page stored as Danish whatever its words: its "a", "do" and "i" are Danish words
    # (not stop words there), yet the question is English, as the corpus is.
    text = (root / "break.md").read_text(encoding="utf-8")
    (root / "break.md").write_text("---\nlanguage: da\n---\n" + text, encoding="utf-8")
    run = await syncer(root, corpus, session, documents_url, embedd_url).request_run()
    assert run.errors == []
    vectord = VectordClient(session, documents_url)
    assert (await languages_of(vectord, corpus))["break.md"] == "danish"
    got = await lexical(vectord, corpus, "how do I show the disk usage of a directory", k=5)
    assert got[0] == "du.md" and "break.md" not in got, got
    # Its own words still find it.
    assert (await lexical(vectord, corpus, "break out of nested loops"))[0] == "break.md"


async def test_the_synced_folder_itself_takes_a_language(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str,
        embedd_url: str) -> None:
    root = small_wiki(tmp_path, {"pages/common": ENGLISH[:6]})
    first = await syncer(root, corpus, session, documents_url, embedd_url).request_run()
    assert first.errors == [] and first.added == 6
    vectord = VectordClient(session, documents_url)
    # "." names the synced folder itself; so does its own name ("wiki" here).
    for key, want in ((".", "german"), ("wiki", "french"), ("", "english")):
        run = await syncer(root, corpus, session, documents_url, embedd_url,
                           {key: want}).request_run()
        assert run.errors == [] and run.updated == 6, (key, run)
        assert set((await languages_of(vectord, corpus)).values()) == {want}, key
        assert run.warnings == [], (key, run)


async def test_a_language_map_that_matches_no_page_is_a_warning(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str,
        embedd_url: str) -> None:
    root = small_wiki(tmp_path, {"pages/common": ENGLISH[:3]})
    run = await syncer(root, corpus, session, documents_url, embedd_url,
                       {"pages.de": "de", ".": "en"}).request_run()
    assert run.errors == [] and run.added == 3
    assert run.warnings == ["languages: folder 'pages.de' matches no page"]


async def test_chinese_and_japanese_words_are_found_inside_sentences(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession, documents_url: str,
        embedd_url: str) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(TLDR / "pages.zh", root / "pages.zh")
    shutil.copytree(TLDR / "pages.ja", root / "pages.ja")
    run = await syncer(root, corpus, session, documents_url, embedd_url).request_run()
    assert run.errors == []
    vectord = VectordClient(session, documents_url)
    langs = await languages_of(vectord, corpus)
    assert {p: lang for p, lang in langs.items() if p.startswith("pages.zh/")} == {
        p: "chinese" for p in langs if p.startswith("pages.zh/")}
    assert {p: lang for p, lang in langs.items() if p.startswith("pages.ja/")} == {
        p: "japanese" for p in langs if p.startswith("pages.ja/")}
    # 提取 ("extract") stands inside "提取一个已存在的 7z 文件，并保持原来的目录结构".
    got = await lexical(vectord, corpus, "如何提取归档文件")
    assert got[0].startswith("pages.zh/common/7z"), got
    # プログラミング言語 ("programming language") inside "ファイル操作のための汎用プログラミング言語".
    got = await lexical(vectord, corpus, "汎用のプログラミング言語")
    assert got[0] == "pages.ja/common/awk.md", got
