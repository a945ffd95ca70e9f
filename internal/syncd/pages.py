"""Markdown wiki pages into stored chunks: front matter, title, a chunk per section.

No I/O: the runner reads files and hands their text here. A chunk's id is
`<path>#<n>` (path relative to the wiki, `/`-separated), and its content hash is
`internal.common.hashing.content_hash` over exactly what vectord stores, so the
`/ids` listing tells the sync which chunks are unchanged without embedding them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import yaml

from internal.common import language as lang
from internal.common.errors import InvalidArgument
from internal.ingest.chunks import chunk_body as chunk_body
from internal.ingest.chunks import document_of, first_heading
from internal.ingest.chunks import split_sections as split_sections
from internal.ingest.documents import ChunkItem, chunk_items
from lakehouse.wire.documents import DocumentIn

PAGE_SUFFIXES = (".md", ".markdown")


Chunk = ChunkItem  # one stored item of a page: what vectord gets, minus the vector


@dataclass(frozen=True)
class Page:
    """One page as the document the sync sends (its id: its path) and the chunks the
    service cuts it into (computed here with the same chunker, to know what changed)."""

    path: str
    title: str
    chunks: tuple[Chunk, ...]
    doc: DocumentIn


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
    return document_of(chunk_id)


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


def title_of(meta: Mapping[str, Any], body: str, relpath: str) -> str:
    """Front matter title, else the first heading, else the file name without suffix."""
    title = meta.get("title")
    if isinstance(title, (str, int, float)) and str(title).strip():
        return str(title).strip()
    return first_heading(body) or PurePosixPath(relpath).stem


def page_of_source(src: Source, language: str, max_chars: int) -> Page:
    """One read page as a document (title, path, folder and language in its metadata; the
    service adds `parent_id`, the page, to every chunk) and its chunks."""
    relpath = src.path
    title = title_of(src.meta, src.body, relpath)
    metadata = {"title": title, "path": relpath, "folder": folder_of(relpath)}
    if language:
        metadata["language"] = language
    doc = DocumentIn(id=relpath, text=src.body, title=title, language=language or None,
                     metadata=metadata)
    return Page(path=relpath, title=title, doc=doc,
                chunks=tuple(chunk_items(doc, "sections", max_chars)))


def build_page(relpath: str, text: str, languages: Mapping[str, str], max_chars: int,
               fallback: str | None = None) -> Page:
    """One page on its own: its told language, else lingua's settled against `fallback`
    (a sync settles each page against its folder's language: languages.settle_pages)."""
    src = read_page(relpath, text, languages)
    language = src.told or lang.settle(src.verdict or lang.Verdict(None), fallback)
    return page_of_source(src, language, max_chars)
