"""Languages of corpora, items and queries, as PostgreSQL text-search configurations.

A language is named by an ISO 639-1 code ("de") or a regconfig name ("german"); inside
we always keep the regconfig name. "auto" is a corpus setting only: detect per item.

Detection is lingua's over a text's prose (code, URLs and placeholders taken out), and
its verdict is used only on confident evidence (`settle`); otherwise the text takes the
language it falls back to: its corpus's own setting, else the dominant language of the
corpus (or of a synced page's folder). Short, code-heavy text is where a detector
guesses: an English tldr page of 60 letters came out French at 0.96, and a page stored
in the wrong language makes the question's stop words its scoring terms.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from internal.common.errors import InvalidArgument

if TYPE_CHECKING:
    from lingua import LanguageDetector

AUTO = "auto"
SIMPLE = "simple"

# Languages PostgreSQL has no configuration for, given one by vectord (schema migration
# 8): words of their scripts are cut into character bigrams before the parser sees them,
# as Elasticsearch's `cjk` analyzer does (docs/decisions/0146-cjk-bigrams.md).
CJK_REGCONFIGS: frozenset[str] = frozenset({"chinese", "japanese"})

# ISO 639-1 code -> regconfig; must match the configurations PostgreSQL 18 ships plus
# CJK_REGCONFIGS (SELECT cfgname FROM pg_ts_config), pinned by tests/vectord/test_language.py.
ISO_TO_REGCONFIG: dict[str, str] = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "zh": "chinese",
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
    "ja": "japanese",
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
# regconfig -> its ISO 639-1 code (the first listed: "norwegian" is "no").
REGCONFIG_TO_ISO: dict[str, str] = {}
for _iso, _cfg in ISO_TO_REGCONFIG.items():
    REGCONFIG_TO_ISO.setdefault(_cfg, _iso)

# Shorter prose is not judged at all: a wrong stemmer is worse than none ("simple").
MIN_DETECT_CHARS = 20
# Confident evidence, the only kind that sets a text apart from the language it falls
# back to: at least CONFIDENT_LETTERS letters of prose and lingua's confidence at least
# CONFIDENT_SHARE. Measured on the 12,648 tldr pages of eight languages
# (docs/decisions/0145-page-language-on-confident-evidence.md): no verdict this
# confident was wrong, and 86-100% of the pages of an alphabet (71% of Chinese, where
# Japanese competes) are this confident, so a page truly in another language than its
# folder's keeps its own.
CONFIDENT_LETTERS = 60
CONFIDENT_SHARE = 0.99
# A character of these scripts carries about a word, where a letter of an alphabet is a
# fifth of one: each counts as this many letters of evidence.
CJK_WEIGHT = 3
_CJK_CHARS = ("\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
              "\uac00-\ud7af")
_CJK = re.compile(f"[{_CJK_CHARS}]")
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)

# What is left out of the judged prose: fenced code, inline code, URLs, {{placeholders}},
# and headings (a wiki page's title is often a command's or a product's name, and one
# odd word can swing lingua: "unxz" made a French line Italian at 1.0).
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t].*)?$", re.M)
_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[^\n]*$", re.M | re.S)
_INLINE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"<?\b(?:https?|ftp|file)://[^\s>]*>?")
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")
JUDGED_CHARS = 2000  # the prose lingua reads: enough for a verdict, bounded in time


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
    # Low-accuracy mode: 40 MB and 0.2 s to load instead of 640 MB and 12 s (measured
    # with these languages); its weaker verdicts on short text are why `settle` asks for
    # confident evidence.
    return (LanguageDetectorBuilder.from_languages(*languages)
            .with_low_accuracy_mode()
            .build())


def prose(text: str) -> str:
    """The text without what is not written in a language: code, URLs, placeholders,
    headings."""
    for pattern in (_FENCED, _INLINE, _URL, _PLACEHOLDER, _HEADING):
        text = pattern.sub(" ", text)
    return text


def evidence(text: str) -> int:
    """How much language `text` holds, in letters (a CJK character counts CJK_WEIGHT)."""
    return len(_LETTERS.findall(text)) + (CJK_WEIGHT - 1) * len(_CJK.findall(text))


@dataclass(frozen=True)
class Verdict:
    """lingua's best guess for a text: a regconfig (None: too little prose to judge),
    its confidence (0..1) and the letters of prose it rests on."""

    language: str | None
    confidence: float = 0.0
    letters: int = 0

    @property
    def confident(self) -> bool:
        """Evidence enough to set the text apart from the language it falls back to."""
        return (self.language is not None and self.letters >= CONFIDENT_LETTERS
                and self.confidence >= CONFIDENT_SHARE)


def judge(text: str) -> Verdict:
    """lingua's verdict over the prose of `text`."""
    words = prose(text)[:JUDGED_CHARS]
    letters = evidence(words)
    if letters < MIN_DETECT_CHARS:
        return Verdict(None, 0.0, letters)
    values = _detector().compute_language_confidence_values(words)
    if not values or values[0].value <= 0:
        return Verdict(None, 0.0, letters)
    best = values[0]
    code = best.language.iso_code_639_1.name.lower()
    return Verdict(ISO_TO_REGCONFIG.get(code), float(best.value), letters)


def settle(verdict: Verdict, fallback: str | None) -> str:
    """The language a judged text is stored in: the verdict when it is confident (or
    when there is nothing to fall back to), else the fallback; "simple" for text too
    short to judge with no fallback."""
    if fallback is not None and fallback != AUTO:
        return verdict.language if verdict.confident and verdict.language else fallback
    return verdict.language or SIMPLE


def detect(text: str) -> str:
    """The regconfig for text's language on lingua's word alone ("simple": too short)."""
    return settle(judge(text), None)


# The corpus-level prior of an `auto` corpus: when one language holds at least
# PRIOR_SHARE of the items whose language was judged (at least PRIOR_MIN of them, the
# corpus's and the batch's), an item takes it unless its own verdict is confident.
PRIOR_SHARE = 0.8
PRIOR_MIN = 10


def detects(explicit: str | None, corpus_language: str) -> bool:
    """Whether resolve_item_language detects the item's language (rather than being told)."""
    if explicit is not None and explicit.strip():
        return explicit.strip().lower() == AUTO
    return corpus_language == AUTO


def dominant(counts: Mapping[str, int]) -> str | None:
    """The language holding PRIOR_SHARE of the judged items ("simple" not counted)."""
    decided = {lang: n for lang, n in counts.items() if lang not in (SIMPLE, AUTO) and n > 0}
    total = sum(decided.values())
    if total < PRIOR_MIN:
        return None
    lang, n = max(decided.items(), key=lambda kv: (kv[1], kv[0]))
    return lang if n >= PRIOR_SHARE * total else None


def fixed_language(explicit: str | None, corpus_language: str, field: str) -> str | None:
    """An item's language when it is told (its own, else its corpus's fixed one); None
    when it is to be detected."""
    if explicit is not None and explicit.strip():
        if explicit.strip().lower() != AUTO:
            return normalize_language(explicit, field)
        return None
    return None if corpus_language == AUTO else corpus_language


def resolve_item_language(explicit: str | None, text: str, corpus_language: str,
                          field: str, prior: str | None = None) -> str:
    """An item's regconfig: explicit, else the corpus's fixed one, else detected and
    settled against the corpus's language (its setting, else `prior`)."""
    told = fixed_language(explicit, corpus_language, field)
    if told is not None:
        return told
    fallback = corpus_language if corpus_language != AUTO else prior
    return settle(judge(text), fallback)


def question_language(counts: Mapping[str, int]) -> str | None:
    """The language a question is taken to be in when it is stemmed in several: the one
    most items of the searched corpora are in (ties: the first name in code-point order);
    None when they hold none. A question is too short to detect (lingua's verdicts of
    five words are guesses), and a corpus's questions come mostly in its pages' language.
    Must match lexical.QUESTION_LANGUAGE and vectord_bm25_query's."""
    held = {lang: n for lang, n in counts.items() if n > 0}
    if not held:
        return None
    return min(held, key=lambda lang: (-held[lang], lang))
