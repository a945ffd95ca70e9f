"""tldr-pages' platform folders as corpora, and the question sets written over them
(tests/fixtures/wiki_questions/platforms*.jsonl: each question with its acceptable
corpus:page and the corpus a person routing by hand would search; their descriptions in
platforms.descriptions.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from bench.data.wiki import QUESTIONS, page_of
from bench.data.wiki import sync as sync  # the selection benchmark syncs each folder

# Each platform folder of pages/ and its corpus (a corpus name has no hyphen).
FOLDERS = {"common": "common", "linux": "linux", "osx": "osx", "windows": "windows",
           "android": "android", "cisco-ios": "cisco_ios", "dos": "dos", "freebsd": "freebsd",
           "netbsd": "netbsd", "openbsd": "openbsd", "sunos": "sunos"}
FOUR = ["common", "linux", "osx", "windows"]
# question set -> the corpora it is asked over (its held-out part: the same)
SETS = {"platforms": FOUR, "platforms_small": list(FOLDERS.values())}


@dataclass(frozen=True)
class Question:
    text: str
    pages: frozenset[str]  # corpus:page
    corpus: str  # routing told by hand: the corpus of its first page
    names: str  # named | implied | none


def questions(name: str) -> list[Question]:
    rows = [json.loads(line) for line in (QUESTIONS / f"{name}.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    return [Question(r["question"], frozenset(r["pages"]), r["corpus"], r["names"]) for r in rows]


def descriptions() -> dict[str, str]:
    return dict(json.loads((QUESTIONS / "platforms.descriptions.json").read_text()))


def hit(found: list[str], q: Question) -> bool:
    """An acceptable corpus:page among the first three hits."""
    return any(p in q.pages for p in found[:3])


def pages(hits: list[dict[str, object]]) -> list[str]:
    """A search answer's hits as corpus:page."""
    return [f"{h['corpus']}:{page_of(str(h['id']), h.get('metadata'))}"  # type: ignore[arg-type]
            for h in hits]

