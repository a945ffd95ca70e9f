"""Highlight marks found in Python (no I/O), proven equal to PostgreSQL's by the index.

A word of a stored field is marked when its lexeme is one of the query's (as the lexical
layer matched them). PostgreSQL's lexeme of a word is its default parser's token run
through the item language's dictionary: a word of letters through that language's
Snowball stemmer, one with digits lower-cased ("simple"). This module does the same with
PyStemmer (Snowball 2.2, as PostgreSQL 18's) over the word parts of the text (letters
and digits; `_`, `-`, `.` and the rest split them, as PostgreSQL's parser splits a
compound into its parts, which are what ts_headline marks).

The two can disagree: the parser reads `x.org/run`, `HIV/AIDS`, e-mail addresses and
numbers (`2.5`, `-1`, the `2` of `anti-IL-2`) as tokens of their own, a stop word has
no lexeme, a newer Snowball stems a few words otherwise. So a marked word must stand
where the parser reads a word too (`_plain`: not next to `/`, `@`, `:`, `\\` or inside a
dotted name; a number not next to `-`, `.`, `+` or a thousands comma), and for every
query lexeme the marked words must be exactly as many as the lexical index's term
frequency of that lexeme in the field (PostgreSQL's own count). Every marked word is then
one PostgreSQL marks, and equal counts leave none of its out. Otherwise `marks` answers
None and the caller asks PostgreSQL (ts_headline).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import Stemmer

# A word part (letters and digits). The parser reads "-1" in "IL-1" as a signed integer:
# such a lexeme is never matched here, its count falls short and PostgreSQL marks it.
_WORD = re.compile(r"[^\W_]+")
# A hyphenated word's lexeme ("well-known"): ts_headline marks its parts, never the whole.
_COMPOUND = re.compile(r"[^\W_]+(?:-[^\W_]+)+")
_JOINS = frozenset("/@:\\")
# Accented letters to their base letter, one character for one (positions stay).
_FOLD = str.maketrans("àáâãäåèéêëìíîïòóôõöùúûüýÿçñ", "aaaaaaeeeeiiiiooooouuuuyycn")
_NUMBER_JOINS = frozenset("-.+")
# Languages (regconfig names) whose words PostgreSQL stems with the Snowball stemmer of
# the same name; "simple" only lower-cases. Any other: None (PostgreSQL marks them).
_SNOWBALL = frozenset(Stemmer.algorithms()) - {"porter"}
_stemmers: dict[str, Stemmer.Stemmer] = {}
# Lower-cased word -> lexeme per language, and the candidates' pattern of a query.
_LEXEMES: dict[str, dict[str, str]] = {}
_HEADS: dict[str, tuple[str, ...]] = {}
KEPT = 200_000  # entries of each; a dict is cleared past it


def stems(language: str) -> bool:
    """Whether this module stems `language` as PostgreSQL does."""
    return language == "simple" or language in _SNOWBALL


def _lexemes(language: str, words: set[str]) -> dict[str, str]:
    """The language's word -> lexeme table, holding at least `words`."""
    seen = _LEXEMES.setdefault(language, {})
    new = [w for w in words if w not in seen]
    if new:
        if len(seen) + len(new) > KEPT:
            seen.clear()
            new = list(words)
        if language == "simple":
            seen.update(zip(new, new, strict=True))
        else:
            stemmer = _stemmers.get(language)
            if stemmer is None:
                stemmer = _stemmers[language] = Stemmer.Stemmer(language)
            # A word with a digit is PostgreSQL's numword or integer: "simple", no stem.
            alpha = [w for w in new if w.isalpha()]
            seen.update(zip(alpha, stemmer.stemWords(alpha), strict=True))
            seen.update((w, w) for w in new if not w.isalpha())
    return seen


def _heads(lexemes: Mapping[str, int]) -> tuple[str, ...]:
    """What a word that may stem to one of the lexemes begins with: the lexeme less its
    last letter (a Snowball stem is the word's beginning, but for a final y made i). A
    word this misses makes its lexeme's count fall short of the index's, so `marks`
    answers None rather than leave it unmarked."""
    key = "\x00".join(sorted(lexemes))
    got = _HEADS.get(key)
    if got is None:
        if len(_HEADS) >= KEPT:
            _HEADS.clear()
        got = _HEADS[key] = tuple(sorted({t[:max(1, len(t) - 1)].translate(_FOLD)
                                          for t in lexemes if _WORD.fullmatch(t)}))
    return got


def _candidates(low: str, heads: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """The whole word parts of `low` that begin with a head, in text order (str.find:
    a few times faster than one regular expression over the text); accents folded on
    both sides, as stemmers fold some (German "Häuser" is "haus")."""
    found: dict[int, tuple[str, int, int]] = {}
    folded = low if low.isascii() else low.translate(_FOLD)
    for head in heads:
        i = folded.find(head)
        while i >= 0:
            if (i == 0 or not low[i - 1].isalnum()) and i not in found:
                m = _WORD.match(low, i)
                if m is not None:
                    found[i] = (m.group(), i, m.end())
            i = folded.find(head, i + 1)
    return [found[i] for i in sorted(found)]


def _plain(text: str, start: int, end: int, digits: bool) -> bool:
    """Whether the word at text[start:end] stands where PostgreSQL's parser reads it as a
    word (part) too: not inside what it reads as a URL, host, file path, e-mail address
    or number."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    then = text[end + 1] if end + 1 < len(text) else " "
    if before in _JOINS or after in _JOINS or (after == "." and then.isalnum()):
        return False
    return not digits or (before not in _NUMBER_JOINS and after not in _NUMBER_JOINS
                          and not (after == "," and then.isalnum()))


def marks(text: str, language: str, lexemes: Mapping[str, int]
          ) -> list[tuple[int, int]] | None:
    """The (start, end) of each word of `text` whose lexeme (in `language`) is one of
    `lexemes`, in text order; None unless each lexeme is carried by exactly as many words
    as its count (the index's term frequency of the lexeme in this field; a compound's
    is not checked, it is never marked) and each of those words stands where PostgreSQL
    reads it as a word too (`_plain`), or when the language is not one stemmed here."""
    if not stems(language):
        return None
    low = text.lower()
    if len(low) != len(text):
        return None  # lower-casing changed the length: leave it to PostgreSQL
    found = _candidates(low, _heads(lexemes))
    table = _lexemes(language, {w for w, _, _ in found})
    out: list[tuple[int, int]] = []
    counts: dict[str, int] = {}
    for word, s, e in found:
        lx = table[word]
        if lx in lexemes:
            if not _plain(low, s, e, not lx.isalpha()):
                return None
            out.append((s, e))
            counts[lx] = counts.get(lx, 0) + 1
    for lx, n in lexemes.items():
        if counts.get(lx, 0) != n and not _COMPOUND.fullmatch(lx):
            return None
    return out
