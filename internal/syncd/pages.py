"""Markdown wiki pages into stored chunks: front matter, title, a chunk per section.

No I/O: the runner reads files and hands their text here. A chunk's id is
`<path>#<n>` (path relative to the wiki, `/`-separated), and its content hash is
`internal.common.hashing.content_hash` over exactly what vectord stores, so the
`/ids` listing tells the sync which chunks are unchanged without embedding them.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from internal.common import language as lang
from internal.common.errors import InvalidArgument
from internal.common.hashing import content_hash
from internal.ingest import Doc

PAGE_SUFFIXES = (".md", ".markdown")
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_ATX_EMPTY = re.compile(r"^ {0,3}#{1,6}[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CHUNK_ID = re.compile(r"^(.*)#(\d+)$")


@dataclass(frozen=True)
class Chunk:
    """One stored item: what vectord gets, minus the vector."""

    id: str
    text: str
    title: str
    metadata: dict[str, str]
    language: str | None
    # What the embedder sees: later chunks carry the page title for context.
    embed_text: str
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        # Must match vectord's content_hash over (title, text, tags, metadata, language).
        object.__setattr__(self, "hash",
                           content_hash(self.title, self.text, None, self.metadata, self.language))

    def doc(self, page: str) -> Doc:
        """This chunk for the ingest pipeline, failing with its page."""
        return Doc(id=self.id, text=self.text, title=self.title, metadata=self.metadata,
                   language=self.language or None, group=page, embedded_from=self.embed_text)


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    chunks: tuple[Chunk, ...]


def is_page(name: str) -> bool:
    return name.lower().endswith(PAGE_SUFFIXES)


def is_ignored(relpath: str, globs: Iterable[str]) -> bool:
    """True when any path component, or the whole relative path, matches a glob."""
    parts = PurePosixPath(relpath).parts
    for glob in globs:
        if fnmatch.fnmatchcase(relpath, glob):
            return True
        if any(fnmatch.fnmatchcase(part, glob) for part in parts):
            return True
    return False


def page_of(chunk_id: str) -> str | None:
    """'a/b.md#3' -> 'a/b.md'; None for ids the sync did not make."""
    m = _CHUNK_ID.match(chunk_id)
    return m.group(1) if m else None


def folder_of(relpath: str) -> str:
    return str(PurePosixPath(relpath).parent)


ROOT_KEYS = (".", "", "/", "./")  # a mapping key naming the synced folder itself


def mapping_key(key: str) -> str:
    """A folder key as the sync compares it: "." for the synced folder itself (".", "",
    "/"), else the path without leading or trailing slashes ("pages.de/", "./docs")."""
    key = key.strip()
    if key in ROOT_KEYS:
        return "."
    return str(PurePosixPath(key.strip("/")))


def mapped(relpath: str, languages: Mapping[str, str], root_name: str = ""
           ) -> tuple[str, str] | None:
    """(the key, its language) of the nearest folder the map names, or None.

    A key may be a folder name or a folder path relative to the wiki; the deepest
    folder that matches wins, up to the synced folder itself, named "." (or by its own
    name, `root_name`: `--lang common=en` for a sync of pages/common).
    """
    if not languages:
        return None
    keys = {mapping_key(k): k for k in languages}
    parent = PurePosixPath(relpath).parent
    for folder in (parent, *parent.parents):
        path = str(folder)
        names = (path, folder.name) if path != "." else (".", root_name)
        for name in names:
            if name and name in keys:
                return keys[name], languages[keys[name]]
    return None


def language_for(relpath: str, languages: Mapping[str, str], root_name: str = "") -> str | None:
    """The mapped language of the nearest folder: 'pages.de/common/x.md' -> languages['pages.de'].

    None means: detect it (`mapped` says which key matched).
    """
    found = mapped(relpath, languages, root_name)
    return found[1] if found else None


def told_language(meta: Mapping[str, Any], mapped_to: str | None) -> str | None:
    """The page's regconfig when it is told: front matter, else the folder map; None:
    detect it (languages.settle_pages)."""
    own = meta.get("language") or meta.get("lang")
    if isinstance(own, str) and own.strip():
        try:
            return lang.normalize_language(own, "language")
        except InvalidArgument:
            pass  # a page's unknown word does not stop the sync: fall back
    if mapped_to:
        return lang.normalize_language(mapped_to, "sync.languages")
    return None


@dataclass(frozen=True)
class Source:
    """One page as read, before its language is settled against its folder's."""

    path: str
    meta: dict[str, Any]
    body: str
    told: str | None  # front matter or the folder map
    verdict: lang.Verdict | None  # lingua's, when not told
    mapped_by: str | None = None  # the folder map's key that named it


def read_page(relpath: str, text: str, languages: Mapping[str, str],
              root_name: str = "") -> Source:
    """A page's front matter and body, its told language or else lingua's verdict."""
    meta, body = split_front_matter(text)
    found = mapped(relpath, languages, root_name)
    told = told_language(meta, found[1] if found else None)
    return Source(path=relpath, meta=meta, body=body, told=told,
                  verdict=None if told is not None else lang.judge(body),
                  mapped_by=found[0] if found else None)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """YAML front matter between '---' lines at the very top; ({}, text) when absent or invalid."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            try:
                meta = yaml.safe_load("".join(lines[1:i]))
            except yaml.YAMLError:
                return {}, text
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                return {}, text
            return meta, "".join(lines[i + 1:])
    return {}, text


def _headings(lines: list[str]) -> list[int]:
    """Indexes of ATX heading lines outside fenced code blocks."""
    out: list[int] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is None and (_ATX.match(line) or _ATX_EMPTY.match(line)):
            out.append(i)
    return out


def first_heading(body: str) -> str | None:
    lines = body.splitlines()
    for i in _headings(lines):
        m = _ATX.match(lines[i])
        if m and m.group(2).strip():
            return m.group(2).strip()
    return None


def title_of(meta: Mapping[str, Any], body: str, relpath: str) -> str:
    """Front matter title, else the first heading, else the file name without suffix."""
    title = meta.get("title")
    if isinstance(title, (str, int, float)) and str(title).strip():
        return str(title).strip()
    return first_heading(body) or PurePosixPath(relpath).stem


def split_sections(body: str) -> list[str]:
    """The body cut before each heading (the text before the first heading is a section)."""
    lines = body.splitlines(keepends=True)
    cuts = [0, *(i for i in _headings(lines) if i > 0), len(lines)]
    sections = ["".join(lines[a:b]) for a, b in itertools.pairwise(cuts)]
    return [s for s in sections if s.strip()]


def _pack(pieces: Iterable[str], max_chars: int) -> list[str]:
    """Join consecutive pieces with a blank line while the result fits in max_chars."""
    out: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}\n\n{piece}" if current else piece
        if len(candidate) <= max_chars:
            current = candidate
        else:
            out.append(current)
            current = piece
    if current:
        out.append(current)
    return out


def _split_long(section: str, max_chars: int) -> list[str]:
    """A section over max_chars: cut at blank lines, then hard-cut what is still too long."""
    slices = (para[i:i + max_chars]
              for para in re.split(r"\n[ \t]*\n", section)
              for i in range(0, max(len(para), 1), max_chars))
    return _pack(slices, max_chars)


def _heading_only(section: str) -> bool:
    lines = [ln for ln in section.splitlines() if ln.strip()]
    return len(lines) == 1 and bool(_ATX.match(lines[0]) or _ATX_EMPTY.match(lines[0]))


def chunk_body(body: str, max_chars: int) -> list[str]:
    """A chunk per section: the body cut before each heading (the text before the first
    heading is a section too), a heading with no text of its own joined to the section
    after it, and a section over max_chars cut at blank lines (then hard-cut).

    Sections are not packed together: the embedder reads 256 word pieces (about 1,000
    characters) of a chunk, so a second section packed behind a first was invisible to
    the vector search (docs/decisions/0148-chunk-per-section.md)."""
    out: list[str] = []
    carry = ""
    for section in (s.strip("\n") for s in split_sections(body)):
        if _heading_only(section):
            carry = f"{carry}\n\n{section}" if carry else section
            continue
        whole = f"{carry}\n\n{section}" if carry else section
        carry = ""
        out += [whole] if len(whole) <= max_chars else _split_long(whole, max_chars)
    if carry:
        out.append(carry)
    return [c.strip() for c in out if c.strip()]


def page_of_source(src: Source, language: str, max_chars: int) -> Page:
    """Turn one read page into its chunks with title, path, folder, parent_id and language."""
    relpath = src.path
    title = title_of(src.meta, src.body, relpath)
    # parent_id: the page every chunk comes from, so `group_by: "parent"` gives one hit a page.
    metadata = {"title": title, "path": relpath, "folder": folder_of(relpath),
                "parent_id": relpath}
    if language:
        metadata["language"] = language
    # A blank page still exists: it is stored as its title, so the corpus lists it.
    texts = chunk_body(src.body, max_chars) or [title]
    chunks = tuple(
        Chunk(id=f"{relpath}#{n}", text=t, title=title, metadata=metadata, language=language,
              embed_text=t if n == 0 else f"{title}\n\n{t}")
        for n, t in enumerate(texts)
    )
    return Page(path=relpath, title=title, chunks=chunks)


def build_page(relpath: str, text: str, languages: Mapping[str, str], max_chars: int,
               fallback: str | None = None) -> Page:
    """One page on its own: its told language, else lingua's settled against `fallback`
    (a sync settles each page against its folder's language: languages.settle_pages)."""
    src = read_page(relpath, text, languages)
    language = src.told or lang.settle(src.verdict or lang.Verdict(None), fallback)
    return page_of_source(src, language, max_chars)
