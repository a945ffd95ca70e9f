"""The tldr wiki (16,000 markdown pages in 8 languages, from the shared corpora) and the
question sets written for it (tests/fixtures/wiki_questions: each question with the pages
that answer it; a set's held-out part in `<set>.held.jsonl`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

from bench.harness.stacks import ROOT, Stack, python_of

QUESTIONS = ROOT / "tests" / "fixtures" / "wiki_questions"
ARCHIVE = ("corpora", "tldr-pages.tar.gz")
# folder key -> (folder in the archive, corpus, the folder's language as stored)
FOLDERS: dict[str, tuple[str, str, str]] = {
    "common": ("pages/common", "tldr", "english"), "linux": ("pages/linux", "tldr_linux", "english"),
    "de": ("pages.de", "tldr_de", "german"),
    "fr": ("pages.fr", "tldr_fr", "french"), "es": ("pages.es", "tldr_es", "spanish"),
    "it": ("pages.it", "tldr_it", "italian"), "ru": ("pages.ru", "tldr_ru", "russian"),
    "zh": ("pages.zh", "tldr_zh", "chinese"), "ja": ("pages.ja", "tldr_ja", "japanese"),
}
# question set -> the folder it asks (its held-out part, when written, asks the same)
SETS = {"en": "common", "zh": "zh", "ja": "ja", "de": "de", "en_de": "de", "en_zh": "zh",
        "names": "linux"}


@dataclass(frozen=True)
class Question:
    text: str
    pages: frozenset[str]
    kind: str = ""  # the names set's: exact, phrase or typo


def questions(name: str) -> list[Question]:
    """A question set (paths relative to the synced folder)."""
    out = []
    for line in (QUESTIONS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Question(row["question"], frozenset(row["pages"]), row.get("kind", "")))
    return out


def sets(folders: list[str]) -> dict[str, str]:
    """The question sets written (and their held-out parts) over these folders."""
    out = {}
    for name, folder in SETS.items():
        for part in (name, f"{name}.held"):
            if folder in folders and (QUESTIONS / f"{part}.jsonl").is_file():
                out[part] = folder
    return out


def page_of(item_id: str, metadata: dict[str, object] | None) -> str:
    """The page a hit (a page or one of its chunks) belongs to."""
    parent = (metadata or {}).get("parent_id")
    return str(parent) if parent else item_id.rpartition("#")[0]


def hit_at_3(found: list[list[str]], asked: list[Question]) -> float:
    """The share of questions with an answering page among their first three hits."""
    return sum(any(p in q.pages for p in pages[:3])
               for pages, q in zip(found, asked, strict=True)) / len(asked)


def archive(data: Path) -> Path:
    return data.joinpath(*ARCHIVE)


async def sync(stack: Stack, folder: Path, corpus: str) -> dict[str, object]:
    """`lakehouse sync` of the stack's checkout, as a new user would."""
    proc = await asyncio.create_subprocess_exec(
        python_of(stack.root), "-m", "internal.cli.main", "sync", str(folder), "--corpus", corpus,
        "--json", "--quiet", "--url", stack.gateway, cwd=stack.root,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if not out.strip():
        raise SystemExit(f"sync of {folder} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return dict(json.loads(out))
