"""The language each synced page is stored in (no I/O).

A page told its language (front matter, the folder map) keeps it. Any other page is
judged by lingua (pages.read_page) and keeps the verdict only when it is confident
(language.settle); otherwise it takes the language it falls back to: the corpus's own
setting when the corpus has a fixed language, else the dominant language of its folder,
learnt from the pages of this scan: the nearest folder up to the synced folder itself
holding at least PRIOR_MIN judged or told pages decides (its dominant language, or none
when it is mixed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import PurePosixPath

from internal.common import language as lang
from internal.syncd.pages import Source


def _folders(relpath: str) -> list[str]:
    """The page's folders, nearest first, ending with the synced folder itself (".")."""
    parent = PurePosixPath(relpath).parent
    return [str(f) for f in (parent, *parent.parents)]


def folder_counts(sources: Iterable[Source]) -> dict[str, Counter[str]]:
    """Per folder (every page counted in each folder above it): pages per language,
    told or judged; a verdict of too little prose counts nowhere."""
    out: dict[str, Counter[str]] = {}
    for src in sources:
        seen = src.told or (src.verdict.language if src.verdict else None)
        if seen is None or seen == lang.SIMPLE:
            continue
        for folder in _folders(src.path):
            out.setdefault(folder, Counter())[seen] += 1
    return out


def folder_language(relpath: str, counts: dict[str, Counter[str]]) -> str | None:
    """The dominant language of the nearest folder with enough pages to say (None:
    mixed, or too few pages anywhere)."""
    for folder in _folders(relpath):
        held = counts.get(folder)
        if held is not None and sum(held.values()) >= lang.PRIOR_MIN:
            return lang.dominant(held)
    return None


def settle_pages(sources: Iterable[Source], corpus_language: str | None) -> dict[str, str]:
    """Each page's regconfig (path -> language). `corpus_language`: the corpus's own
    setting ("auto" or None: none), the fallback of every judged page when fixed."""
    pages = list(sources)
    fixed = corpus_language if corpus_language not in (None, lang.AUTO) else None
    counts = folder_counts(pages) if fixed is None else {}
    out: dict[str, str] = {}
    for src in pages:
        if src.told is not None:
            out[src.path] = src.told
            continue
        fallback = fixed or folder_language(src.path, counts)
        out[src.path] = lang.settle(src.verdict or lang.Verdict(None), fallback)
    return out


# A language of at least this share of a wiki's pages (told or judged) counts in the
# choice of a new corpus's model (lakehouse.wire.models.model_for).
MODEL_SHARE = 0.1


def main_languages(sources: Iterable[Source]) -> list[str]:
    """ISO 639-1 codes of the languages holding MODEL_SHARE of the pages whose language is
    told or judged, most pages first (a language without a code of ours is not counted)."""
    counts = folder_counts(sources).get(".", Counter())
    total = sum(counts.values())
    return [code for cfg, n in counts.most_common()
            if n >= MODEL_SHARE * total and (code := lang.REGCONFIG_TO_ISO.get(cfg))]
