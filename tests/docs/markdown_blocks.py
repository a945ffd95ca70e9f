"""A markdown text cut into its top-level blocks, and a digest of each that survives a
move between files: the one reading the decisions' tests share with the manifest of the old
DECISIONS.md (tests/docs/decisions_manifest.json).

A block is a heading line, a fence (to its closing fence), a table (its run of `|` lines),
a list item with every indented line under it (blank lines inside included when the next
line is indented: its nested items, tables and fences), or a paragraph. The digest reads
the block with its markdown links reduced to their text and its whitespace collapsed, so
indenting a block, re-wrapping it or making a phrase of it a link keeps its digest; a
changed word does not.

Run as a program on a markdown file to print its manifest (the sections, their blocks'
lines and digests): `python -m tests.docs.markdown_blocks OLD_DECISIONS.md`.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys

_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*\)")


def _opens_block(line: str) -> bool:
    return line.startswith(("- ", "#", "|", "```"))


def _item_or_paragraph_end(lines: list[str], i: int, item: bool) -> int:
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            j = i
            while j < len(lines) and not lines[j].strip():
                j += 1
            if item and j < len(lines) and lines[j].startswith(" "):
                i = j
                continue
            return i
        if not line.startswith(" ") and _opens_block(line):
            return i
        i += 1
    return i


def blocks(text: str) -> list[tuple[int, str]]:
    """(line number of its first line, its text) for each top-level block."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        start = i
        if line.startswith("```"):
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            i += 1
        elif line.startswith("#"):
            i += 1
        elif line.startswith("|"):
            while i < len(lines) and lines[i].startswith("|"):
                i += 1
        else:
            i = _item_or_paragraph_end(lines, i + 1, line.startswith("- "))
        out.append((start + 1, "\n".join(lines[start:i]).rstrip()))
    return out


def normalise(block: str) -> str:
    return " ".join(_LINK.sub(r"\1", block).split())


def digest(block: str) -> str:
    return hashlib.sha256(normalise(block).encode()).hexdigest()[:16]


def manifest(text: str) -> list[dict[str, object]]:
    """Each `## ` section: its title, its line, and [line, digest] for each of its blocks
    but headings."""
    sections: list[dict[str, object]] = []
    for line, block in blocks(text):
        if block.startswith("## "):
            sections.append({"title": block[3:].strip(), "line": line, "blocks": []})
        elif sections and not block.startswith("#"):
            entries = sections[-1]["blocks"]
            assert isinstance(entries, list)
            entries.append([line, digest(block)])
    return sections


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        print(json.dumps(manifest(f.read()), indent=1, ensure_ascii=False))
