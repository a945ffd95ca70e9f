"""Languages of corpora, items and queries, as PostgreSQL text-search configurations.

A language is named by an ISO 639-1 code ("de") or a regconfig name ("german"); inside
we always keep the regconfig name. "auto" is a corpus setting only: detect per item.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from internal.common.errors import InvalidArgument

if TYPE_CHECKING:
    from lingua import LanguageDetector

AUTO = "auto"
SIMPLE = "simple"

# ISO 639-1 code -> regconfig; must match the configurations PostgreSQL 18 ships
# (SELECT cfgname FROM pg_ts_config), pinned by tests/vectord/test_language.py.
ISO_TO_REGCONFIG: dict[str, str] = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
REGCONFIGS: frozenset[str] = frozenset(ISO_TO_REGCONFIG.values()) | {SIMPLE}

# Shorter texts are not judged: a detector guesses poorly on a few words, and a wrong
# stemmer is worse than none ("simple").
MIN_DETECT_CHARS = 20
_LETTERS = re.compile(r"\w", re.UNICODE)


def _normalize(value: str, field: str, *, allow_auto: bool) -> str:
    key = value.strip().lower()
    if allow_auto and key == AUTO:
        return AUTO
    if key in REGCONFIGS:
        return key
    regconfig = ISO_TO_REGCONFIG.get(key)
    if regconfig is None:
        allowed = "an ISO 639-1 code or a PostgreSQL text search configuration"
        raise InvalidArgument(f"{field}: unknown language {value!r}; expected {allowed}",
                              field=field)
    return regconfig


def normalize_language(value: str, field: str) -> str:
    """An item's or query's language as a regconfig name; unknown -> InvalidArgument."""
    return _normalize(value, field, allow_auto=False)


def normalize_corpus_language(value: str | None, field: str) -> str:
    """A corpus's language: a regconfig name or "auto" (None means "auto")."""
    if value is None:
        return AUTO
    return _normalize(value, field, allow_auto=True)


@functools.cache
def _detector() -> LanguageDetector:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = []
    for code in ISO_TO_REGCONFIG:
        try:
            iso = getattr(IsoCode639_1, code.upper())
            languages.append(Language.from_iso_code_639_1(iso))
        except (AttributeError, ValueError):
            continue  # lingua has no model for it (e.g. Nepali, Yiddish)
    # Low-accuracy mode: 40 MB and 0.2 s to load instead of 500 MB and 4 s; it is
    # reliable on sentence-length text, which is all we judge (MIN_DETECT_CHARS).
    return (LanguageDetectorBuilder.from_languages(*languages)
            .with_low_accuracy_mode()
            .with_minimum_relative_distance(0.1)
            .build())


def detect(text: str) -> str:
    """The regconfig for text's language, or "simple" when too short or undecided."""
    if len(_LETTERS.findall(text[:2000])) < MIN_DETECT_CHARS:
        return SIMPLE
    found = _detector().detect_language_of(text[:2000])
    if found is None:
        return SIMPLE
    return ISO_TO_REGCONFIG.get(found.iso_code_639_1.name.lower(), SIMPLE)


# The corpus-level prior of an `auto` corpus: when one language holds at least
# PRIOR_SHARE of the items whose language was detected (at least PRIOR_MIN of them, the
# corpus's and the batch's), an item too short or too ambiguous to detect takes it instead
# of "simple". "simple" keeps stop words and no stems, so a few such items in an English
# corpus made every query also match unstemmed forms.
PRIOR_SHARE = 0.8
PRIOR_MIN = 10


def detects(explicit: str | None, corpus_language: str) -> bool:
    """Whether resolve_item_language detects the item's language (rather than being told)."""
    if explicit is not None and explicit.strip():
        return explicit.strip().lower() == AUTO
    return corpus_language == AUTO


def dominant(counts: dict[str, int]) -> str | None:
    """The language holding PRIOR_SHARE of the detected items ("simple" not counted)."""
    decided = {lang: n for lang, n in counts.items() if lang not in (SIMPLE, AUTO) and n > 0}
    total = sum(decided.values())
    if total < PRIOR_MIN:
        return None
    lang, n = max(decided.items(), key=lambda kv: (kv[1], kv[0]))
    return lang if n >= PRIOR_SHARE * total else None


def resolve_item_language(explicit: str | None, text: str, corpus_language: str,
                          field: str) -> str:
    """An item's regconfig: explicit, else the corpus's fixed one, else detected or simple."""
    if explicit is not None and explicit.strip():
        if explicit.strip().lower() != AUTO:
            return normalize_language(explicit, field)
    elif corpus_language != AUTO:
        return corpus_language
    return detect(text)
