"""Chunking, titles, ignores and folder languages (pure module, no I/O)."""

from __future__ import annotations

import pytest

from internal.common.hashing import content_hash
from internal.syncd.languages import settle_pages
from internal.syncd.pages import (
    Source,
    build_page,
    chunk_body,
    is_ignored,
    language_for,
    mapped,
    page_of,
    read_page,
    split_front_matter,
    title_of,
)
from tests.helpers import ROOT


def test_front_matter_title_beats_heading() -> None:
    text = "---\ntitle: Deploy guide\ntags: [ops]\n---\n# deploy\n\nSteps.\n"
    meta, body = split_front_matter(text)
    assert meta["title"] == "Deploy guide"
    assert body.startswith("# deploy")
    assert title_of(meta, body, "ops/deploy.md") == "Deploy guide"


def test_title_falls_back_to_heading_then_file_name() -> None:
    assert title_of({}, "intro\n\n## tar\n\ntext", "x/tar.md") == "tar"
    assert title_of({}, "no heading here", "x/tar.md") == "tar"
    # A '#' inside a code fence is not a heading.
    assert title_of({}, "```sh\n# comment\n```\n# real\n", "x.md") == "real"


def test_broken_front_matter_is_kept_as_text() -> None:
    text = "---\ntitle: [unclosed\n---\nbody\n"
    meta, body = split_front_matter(text)
    assert meta == {}
    assert body == text


def test_short_page_is_one_chunk_with_metadata() -> None:
    page = build_page("pages.de/common/tar.md", "# tar\n\n> Archivierer.\n", {"pages.de": "de"}, 2000)
    assert [c.id for c in page.chunks] == ["pages.de/common/tar.md#0"]
    chunk = page.chunks[0]
    assert chunk.title == "tar"
    # Languages are resolved as vectord resolves them (ISO code -> regconfig).
    assert chunk.language == "german"
    assert chunk.metadata == {"title": "tar", "path": "pages.de/common/tar.md",
                              "folder": "pages.de/common", "parent_id": "pages.de/common/tar.md",
                              "language": "german"}
    # The page goes to the service as a document: its chunks' fields but `parent_id`,
    # which the service sets (the document's id, the page's path).
    assert (page.doc.id, page.doc.language) == ("pages.de/common/tar.md", "german")
    assert page.doc.metadata == {k: v for k, v in chunk.metadata.items() if k != "parent_id"}
    # The hash is what vectord computes over the stored fields.
    assert chunk.hash == content_hash("tar", chunk.text, [], chunk.metadata, "german")


def test_long_page_splits_along_headings() -> None:
    sections = [f"## part {i}\n\n" + ("word " * 80) for i in range(6)]
    body = "# Big page\n\nintro\n\n" + "\n".join(sections)
    chunks = chunk_body(body, 1000)
    assert len(chunks) > 1
    assert all(len(c) <= 1000 for c in chunks)
    # Every chunk after the first starts at a heading: no section is cut in two.
    assert all(c.startswith("## part") for c in chunks[1:])
    assert "".join(chunks).replace("\n", "").replace(" ", "") == body.replace("\n", "").replace(" ", "")


def test_a_page_is_cut_at_each_heading() -> None:
    # The tour's example page: its "## When a job does not come out" is a chunk of its own
    # (it was packed behind the intro, up to 2,000 characters, and shown inside it).
    text = (ROOT / "docs" / "examples" / "wiki" / "printing.md").read_text(encoding="utf-8")
    page = build_page("printing.md", text, {}, 2000)
    assert [c.text.splitlines()[0] for c in page.chunks] == [
        "# Printing", "## When a job does not come out"]
    # A heading with no text of its own stays with the section after it.
    assert chunk_body("# A\n\n## B\n\ntext b\n\n## C\n\ntext c\n", 2000) == [
        "# A\n\n## B\n\ntext b", "## C\n\ntext c"]
    assert chunk_body("intro\n\n## Only a heading\n", 2000) == ["intro", "## Only a heading"]


def test_oversized_section_is_cut_at_paragraphs() -> None:
    body = "# T\n\n" + "\n\n".join("p" * 300 for _ in range(10))
    chunks = chunk_body(body, 700)
    assert len(chunks) >= 5
    assert all(len(c) <= 700 for c in chunks)


def test_shrinking_page_has_fewer_chunk_ids() -> None:
    long = "# T\n\n" + "\n\n".join(f"## s{i}\n\n" + "x " * 200 for i in range(5))
    big = build_page("a.md", long, {}, 500)
    small = build_page("a.md", "# T\n\nshort now\n", {}, 500)
    assert len(big.chunks) == 5
    assert [c.id for c in small.chunks] == ["a.md#0"]


def test_later_chunks_embed_with_title() -> None:
    long = "# Title\n\n" + "\n\n".join(f"## s{i}\n\n" + "x " * 200 for i in range(3))
    page = build_page("a.md", long, {}, 500)
    assert page.chunks[1].embed_text.startswith("Title\n\n## s")
    assert page.chunks[0].embed_text == page.chunks[0].text


def test_blank_page_is_still_stored() -> None:
    page = build_page("docs/empty.md", "\n\n", {}, 2000)
    assert [(c.id, c.text) for c in page.chunks] == [("docs/empty.md#0", "empty")]


def test_ignore_globs() -> None:
    globs = ("_index.md", ".*")
    assert is_ignored("_index.md", globs)
    assert is_ignored("pages/_index.md", globs)
    assert is_ignored(".hidden.md", globs)
    assert is_ignored(".git/HEAD.md", globs)
    assert not is_ignored("pages/common/tar.md", globs)
    assert is_ignored("drafts/x.md", ("drafts/*",))


def test_folder_language_map() -> None:
    langs = {"pages.de": "de", "pages.fr": "fr", "docs/intern/de": "german"}
    assert language_for("pages.de/common/tar.md", langs) == "de"
    assert language_for("pages.fr/linux/ls.md", langs) == "fr"
    assert language_for("docs/intern/de/a.md", langs) == "german"
    assert language_for("pages/common/tar.md", langs) is None
    assert language_for("top.md", langs) is None
    # Front matter may name the language itself.
    page = build_page("pages/x.md", "---\nlanguage: es\n---\n# x\n", langs, 2000)
    assert page.chunks[0].language == "spanish"


def test_the_synced_folder_itself_is_mapped() -> None:
    # ".", "" and "/" name the synced folder itself; so does its own name. A deeper
    # folder's mapping still wins.
    for key in (".", "", "/", "./"):
        assert language_for("tar.md", {key: "en"}) == "en", key
        assert language_for("linux/ls.md", {key: "en", "linux": "de"}) == "de", key
    assert language_for("tar.md", {"common": "en"}, root_name="common") == "en"
    assert language_for("tar.md", {"common": "en"}) is None
    assert mapped("a/b/c.md", {"pages.de/": "de", "a/": "fr"}) == ("a/", "fr")


def test_cli_lang_pairs_accept_the_synced_folder() -> None:
    from internal.cli.sync_cmd import _languages

    assert _languages(["=en", "pages.de=de"], {}) == {".": "en", "pages.de": "de"}
    assert _languages([".=en"], {"x": "fr"}) == {"x": "fr", ".": "en"}
    for bad in ("en", "pages.de=", "pages.de=xx"):
        with pytest.raises(SystemExit):
            _languages([bad], {})


def _source(path: str, body: str) -> Source:
    return read_page(path, body, {})


FRENCH_LINE = "> Cette commande est un alias de la commande originale.\n"
ENGLISH_PAGE = ("# x\n\n> Convert an image from one format to another, keeping its "
                "colours and size.\n")


def test_a_page_takes_its_folders_language_unless_its_own_is_confident() -> None:
    english = [_source(f"en/p{i}.md", ENGLISH_PAGE) for i in range(12)]
    # Short and code-heavy: lingua leans French, on too little prose to be trusted.
    alias = _source("en/bye.md", "# bye\n\n" + FRENCH_LINE + "\n`tldr exit`\n")
    german = _source("en/de.md", "# x\n\n> " + " ".join(
        ["Dieses Werkzeug wandelt Bilder von einem Format in ein anderes um."] * 3) + "\n")
    langs = settle_pages([*english, alias, german], None)
    assert langs["en/bye.md"] == "english"  # the folder's language
    assert langs["en/de.md"] == "german"  # confident evidence of its own
    assert {langs[s.path] for s in english} == {"english"}
    # A folder of its own: its pages decide for it, not the whole wiki's.
    french = [_source(f"fr/p{i}.md", "# x\n\n" + FRENCH_LINE) for i in range(12)]
    langs = settle_pages([*english, *french, _source("fr/code.md", "# x\n\n`ls -la`\n")],
                         None)
    assert langs["fr/code.md"] == "french" and langs["en/p0.md"] == "english"
    # A corpus with a language of its own: every judged page falls back to it.
    assert settle_pages([alias], "english") == {"en/bye.md": "english"}
    assert settle_pages([alias], "auto")["en/bye.md"] != "english"  # no prior: lingua's word


def test_unmapped_language_is_detected() -> None:
    de = "# tar\n\n> Archiviert Dateien und extrahiert sie wieder aus einem Archiv.\n"
    en = "# tar\n\n> Archives files and extracts them again from an archive file.\n"
    assert build_page("x/a.md", de, {}, 2000).chunks[0].language == "german"
    assert build_page("x/a.md", en, {}, 2000).chunks[0].language == "english"
    assert build_page("x/a.md", "# ls\n", {}, 2000).chunks[0].language == "simple"


def test_page_of_chunk_ids() -> None:
    assert page_of("pages/common/tar.md#0") == "pages/common/tar.md"
    assert page_of("a#b.md#12") == "a#b.md"
    assert page_of("not-a-chunk") is None
