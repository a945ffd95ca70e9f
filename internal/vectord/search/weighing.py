"""Each layer weighed by what it can see (no I/O).

An embedding model reads the languages it was trained for (embedd's model listing
declares them: `languages`, ISO 639-1 codes; none declared: taken to read every one).
Its vectors of a page in another language, or of a question in another script, are
noise that fusion would count as much as the lexical layer's evidence: the English
model's vectors found 4 of 26 Chinese questions' pages where BM25 found 23. So the
vector layer's weight is scaled by what the model reads of the question (`vector_seen`:
the share of its letters in a script of a declared language), as
`floor + (1 - floor) * seen` of its weight, the lexical layer keeping its own. A model
declaring the language gives the vector layer its full weight back.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from internal.common import language
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


def vector_seen(corpora: Iterable[tuple[Mapping[str, int], frozenset[str] | None]],
                text: str) -> float:
    """What the vector layer reads of a search, in [0, 1]: the share of the question's
    letters in a script of each corpus's model's declared languages, weighted by the
    corpora's items (a corpus whose model declares none reads it all).

    The question's script decides, not the pages' language nor the question's language
    within a script: over the German tldr pages the English MiniLM's vectors, fused at
    full weight, lift the default above BM25 for German questions (0.906 against 0.844)
    and for English ones (0.750 against 0.594), where weighing them down by the pages'
    language, or by lingua's word on the question, lost those (docs/decisions/0221)."""
    seen = total = 0.0
    for held, declared in corpora:
        n = sum(v for v in held.values() if v > 0) or 1
        seen += n * question_seen(text, declared)
        total += n
    return seen / total if total else 1.0


def lexical_seen(corpora: Iterable[tuple[Mapping[str, int], frozenset[str] | None]],
                 asked: str | None) -> float:
    """What the lexical layer reads of a search whose question is in `asked` (a regconfig,
    as lingua judged it; None: not judged), in [0, 1]: 1 less the share of the corpora's
    items stored in another language that their model reads as well as the question's.

    Words match only words of their own language; where the model reads both languages,
    its vectors carry the question across and BM25 adds noise (English questions over the
    German and Chinese tldr pages with the multilingual model: vector 0.781 and 0.938,
    BM25 0.594 and 0.375, the fusion at equal weights 0.688 and 0.719). Where the model
    does not read the question's language the lexical layer keeps its weight: under the
    English model BM25 was the better layer for English questions over German pages
    (docs/decisions/0221)."""
    if asked is None:
        return 1.0
    iso = language.REGCONFIG_TO_ISO.get(asked)
    seen = total = 0.0
    for held, declared in corpora:
        items = {lang: n for lang, n in held.items() if n > 0 and lang != language.SIMPLE}
        n = sum(items.values())
        total += n
        if declared is None or iso not in declared:
            seen += n
            continue
        seen += n - sum(k for lang, k in items.items()
                        if lang != asked and language.REGCONFIG_TO_ISO.get(lang) in declared)
    return seen / total if total else 1.0


def weights(base: Mapping[str, float], seen: float, floor: float | None = None,
            lexical: float = 1.0) -> dict[str, float]:
    """The layers' weights with the vector layer's scaled by what it sees, and the lexical
    layer's by what it sees (`lexical`), each as `floor + (1 - floor) * seen` (floor:
    FLOOR)."""
    floor = FLOOR if floor is None else floor
    out = dict(base)
    for layer, share in ((VECTOR, seen), (LEXICAL, lexical)):
        if layer in out and share < 1.0:
            out[layer] = out[layer] * (floor + (1.0 - floor) * max(0.0, share))
    return out
