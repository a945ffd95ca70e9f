"""A document's text cut into the chunks the service stores: a chunk per section (no I/O).

One chunker for every writer: the document route (vectord), the wiki sync (syncd and
`lakehouse sync`, which send their pages as documents) and `lakehouse ingest`. The rules
are the README's: the text cut before each markdown heading (outside fenced code), a
heading with no text of its own joined to the section after it, a section over
`chunk_chars` cut at blank lines (then hard-cut); sections are not packed together
(docs/decisions/0148-chunk-per-section.md). A document's chunk n is stored as
`<document id>#<n>`; with chunking `none` its one chunk is stored under the document's
own id.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lakehouse.wire.documents import DEFAULT_CHUNK_CHARS as DEFAULT_CHUNK_CHARS
from lakehouse.wire.shapes import embed_text

Chunking = Literal["sections", "none"]

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_ATX_EMPTY = re.compile(r"^ {0,3}#{1,6}[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CHUNK_ID = re.compile(r"^(.*)#(\d+)$")


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


def chunk_id(document_id: str, n: int) -> str:
    """The id chunk n of a document is stored under."""
    return f"{document_id}#{n}"


def document_of(chunk: str) -> str | None:
    """'a/b.md#3' -> 'a/b.md'; None for an id no section chunking made."""
    m = _CHUNK_ID.match(chunk)
    return m.group(1) if m else None


def _opens_with(text: str, title: str) -> bool:
    """Whether the text's first line is a heading saying the title (a page's own heading)."""
    first = text.lstrip("\n").split("\n", 1)[0]
    m = _ATX.match(first)
    return m is not None and m.group(2).strip() == title.strip()


@dataclass(frozen=True)
class Piece:
    """One chunk of a document: its id, its stored text and the text the model reads."""

    id: str
    text: str
    embed_text: str


def pieces(document_id: str, title: str | None, text: str, chunking: Chunking = "sections",
           chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[Piece]:
    """The document's chunks, in order. A chunk after the first is read by the model with
    the document's title before it (its own heading alone does not say what it belongs
    to); the first too, unless it opens with the title as a heading. A document whose
    text has nothing but blank lines is stored as its title. `none`: the text as one
    chunk under the document's id, read with its title (as an item's text is)."""
    if chunking == "none":
        return [Piece(document_id, text, embed_text(title, text))]
    texts = chunk_body(text, chunk_chars) or [title or text]
    return [Piece(chunk_id(document_id, n), t, read_as(title, t, n)) for n, t in enumerate(texts)]


def read_as(title: str | None, text: str, n: int) -> str:
    """What the model reads of chunk n: the title, a blank line, the text; the text alone
    when there is no title, when the text is the title, or when the first chunk opens
    with the title as its heading."""
    if not title or text.strip() == title.strip() or (n == 0 and _opens_with(text, title)):
        return text
    return f"{title}\n\n{text}"
