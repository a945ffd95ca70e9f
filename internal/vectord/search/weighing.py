"""Each layer weighed by what it can see (no I/O).

An embedding model reads the languages it was trained for (embedd's model listing
declares them: `languages`, ISO 639-1 codes; none declared: taken to read every one).
Its vectors of a page in another language, or of a question in another script, are
noise that fusion would count as much as the lexical layer's evidence: the English
model's vectors found 3 of 25 Chinese questions' pages where BM25 found 20. So the
vector layer's weight is scaled by what the model can read of the search:

- the share of the searched items stored in a language the model declares (the
  lexical index's per-language counts; `simple`, an undetected language, counts as
  read), times
- the share of the question's letters in a script of a declared language (a Chinese
  question to the English model reads as nothing, whatever the pages),

as `floor + (1 - floor) * seen` of its weight, the lexical layer keeping its own.
A model declaring the language gives the vector layer its full weight back.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from internal.common.language import ISO_TO_REGCONFIG, SIMPLE
from lakehouse.wire.search import LAYERS

VECTOR, LEXICAL, SYMBOLIC = LAYERS

# The vector layer's share of its weight when the model reads nothing of the search
# (measured: docs/decisions/0221).
FLOOR = 0.1

# The scripts a language is written in, for the languages whose script is not Latin
# (every other language reads Latin letters). A script is the first word of a letter's
# Unicode name ("CJK UNIFIED IDEOGRAPH-4E2D": CJK).
SCRIPTS: dict[str, frozenset[str]] = {
    "zh": frozenset({"CJK"}),
    "ja": frozenset({"CJK", "HIRAGANA", "KATAKANA"}),
    "ko": frozenset({"HANGUL", "CJK"}),
    "ru": frozenset({"CYRILLIC"}),
    "uk": frozenset({"CYRILLIC"}),
    "bg": frozenset({"CYRILLIC"}),
    "sr": frozenset({"CYRILLIC", "LATIN"}),
    "el": frozenset({"GREEK"}),
    "ar": frozenset({"ARABIC"}),
    "hi": frozenset({"DEVANAGARI"}),
    "ne": frozenset({"DEVANAGARI"}),
    "ta": frozenset({"TAMIL"}),
    "hy": frozenset({"ARMENIAN"}),
    "yi": frozenset({"HEBREW"}),
    "he": frozenset({"HEBREW"}),
}
LATIN = frozenset({"LATIN"})
_REGCONFIG_TO_ISO: dict[str, str] = {}
for _iso, _reg in ISO_TO_REGCONFIG.items():
    _REGCONFIG_TO_ISO.setdefault(_reg, _iso)


def scripts_of(languages: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for lang in languages:
        out |= SCRIPTS.get(lang, LATIN)
    return frozenset(out)


def _script(ch: str) -> str | None:
    try:
        return unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return None


def question_seen(text: str, declared: frozenset[str] | None) -> float:
    """The share of the question's letters in a script of the declared languages (1 with
    none declared, or no letter)."""
    if declared is None:
        return 1.0
    scripts = scripts_of(declared)
    letters = seen = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            seen += _script(ch) in scripts
    return seen / letters if letters else 1.0


def items_seen(held: Mapping[str, int], declared: frozenset[str] | None) -> tuple[int, int]:
    """(items in a declared language, items) of a corpus's per-language counts (regconfig
    names); every item is seen with none declared."""
    total = sum(n for n in held.values() if n > 0)
    if declared is None:
        return total, total
    seen = sum(n for lang, n in held.items() if n > 0 and (
        lang == SIMPLE or _REGCONFIG_TO_ISO.get(lang) in declared))
    return seen, total


def vector_seen(corpora: Iterable[tuple[Mapping[str, int], frozenset[str] | None]],
                text: str) -> float:
    """What the vector layer reads of a search, in [0, 1]: the share of the searched items
    in their model's declared languages times the share of the question it reads (the
    question read by each corpus's model, weighted by its items)."""
    seen = total = 0.0
    for held, declared in corpora:
        s, n = items_seen(held, declared)
        seen += s * question_seen(text, declared)
        total += n
    return seen / total if total else 1.0


def weights(base: Mapping[str, float], seen: float, floor: float = FLOOR) -> dict[str, float]:
    """The layers' weights with the vector layer's scaled by what it sees."""
    out = dict(base)
    if VECTOR in out and seen < 1.0:
        out[VECTOR] = out[VECTOR] * (floor + (1.0 - floor) * max(0.0, seen))
    return out
