"""Highlight marks found in Python (no I/O), proven equal to PostgreSQL's by the index.

A word of a stored field is marked when its lexeme is one of the query's (as the lexical
layer matched them). PostgreSQL's lexeme of a word is its default parser's token run
through the item language's dictionary: a word of letters through that language's
Snowball stemmer, one with digits lower-cased ("simple"). This module reads the word
parts of the text (letters and digits; `_`, `-`, `.` and the rest split them, as
PostgreSQL's parser splits a compound into its parts, which are what ts_headline marks)
and looks their lexemes up in a table of words PostgreSQL itself stemmed (`wanted` names
the words a text needs that the table lacks; the caller has PostgreSQL stem them, one
statement for all the hits, and `learn`s them): the lexemes are PostgreSQL's own, of
whatever version, with no stemmer of our own to keep in step with it.

The two can disagree: the parser reads `x.org/run`, `HIV/AIDS`, e-mail addresses and
numbers (`2.5`, `-1`, the `2` of `anti-IL-2`) as tokens of their own, a stop word has
no lexeme. So a marked word must stand
where the parser reads a word too (`_plain`: not next to `/`, `@`, `:`, `\\` or inside a
dotted name; a number not next to `-`, `.`, `+` or a thousands comma), and for every
query lexeme the marked words must be exactly as many as the lexical index's term
frequency of that lexeme in the field (PostgreSQL's own count). Every marked word is then
one PostgreSQL marks, and equal counts leave none of its out. Otherwise `marks` answers
None and the caller asks PostgreSQL (ts_headline).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from internal.vectord.lexical import cjk

# A word part (letters and digits); a signed integer's lexeme ("-1" of "IL-1").
_WORD = re.compile(r"[^\W_]+")
_SIGNED = re.compile(r"-\d+")
# A hyphenated word's lexeme ("well-known"): ts_headline marks its parts, never the whole.
_COMPOUND = re.compile(r"[^\W_]+(?:-[^\W_]+)+")
# Accented letters to their base letter, one character for one (positions stay).
_FOLD = str.maketrans("àáâãäåèéêëìíîïòóôõöùúûüýÿçñ", "aaaaaaeeeeiiiiooooouuuuyycn")
# Lower-cased word -> its lexeme as PostgreSQL stems it ("" for none: a stop word), per
# language (regconfig name), learnt from PostgreSQL.
_LEXEMES: dict[str, dict[str, str]] = {}
KEPT = 200_000  # words per language; the table is cleared past it


def _table(language: str) -> dict[str, str]:
    return _LEXEMES.setdefault(language, {})


def learn(language: str, lexemes: Mapping[str, str]) -> None:
    """Words PostgreSQL stemmed in `language` (word -> lexeme, "" for none)."""
    seen = _table(language)
    if len(seen) + len(lexemes) > KEPT:
        seen.clear()
    seen.update(lexemes)


def _head(lexeme: str) -> str:
    """What a word that may stem to the lexeme begins with: the lexeme less its last
    letter (a Snowball stem is the word's beginning, but for a final y made i), accents
    folded. A word this misses makes its lexeme's count fall short of the index's, so
    `marks` answers None rather than leave it unmarked."""
    head = lexeme[:max(1, len(lexeme) - 1)]
    return head if head.isascii() else head.translate(_FOLD)


@functools.lru_cache(maxsize=65536)
def _shape(lexeme: str) -> str | None:
    """None for a compound's lexeme (never marked), "" for one that is no single word
    (a signed integer's), else its `_head`: the same query lexemes come back for every
    field of every hit, so they are read once."""
    if _COMPOUND.fullmatch(lexeme):
        return None
    return _head(lexeme) if _WORD.fullmatch(lexeme) else ""


def _candidates(low: str, heads: list[str], fold: bool) -> list[tuple[str, int, int]]:
    """The whole word parts of `low` that begin with a head, in text order (str.find:
    a few times faster than one regular expression over the text); `fold`: accents
    folded on both sides, as most stemmers fold some (German "Häuser" is "haus")."""
    found: dict[int, tuple[str, int, int]] = {}
    folded = low if not fold or low.isascii() else low.translate(_FOLD)
    for head in heads:
        i = folded.find(head)
        while i >= 0:
            if (i == 0 or not low[i - 1].isalnum()) and i not in found:
                m = _WORD.match(low, i)
                if m is not None:
                    found[i] = (m.group(), i, m.end())
            i = folded.find(head, i + 1)
    return [found[i] for i in sorted(found)]


MARK, OTHER, UNSURE = 1, 0, -1  # how PostgreSQL reads a word found here (`_reading`)
_PLAIN = frozenset(" \t\n,;()[]\"'")  # around a word of letters: `_reading` says MARK


def _chained(text: str, dash: int) -> bool:
    """Whether the word part before text[dash] (a hyphen) is itself joined by a hyphen to
    one before it ("anti-IL" in "anti-IL-2"): the parser then ends a compound there."""
    i = dash
    while i > 0 and text[i - 1].isalnum():
        i -= 1
    return i < dash and i >= 2 and text[i - 1] == "-" and text[i - 2].isalnum()


def _reading(text: str, start: int, end: int) -> int:
    """How PostgreSQL's parser reads the word part text[start:end] (maximal, letters and
    digits), as observed with ts_debug on PostgreSQL 18's default parser: MARK, as this
    word (part); OTHER, inside another token: a file path, host, e-mail address or
    decimal (`hiv/aids`, `x.org`, `levels.1`, `2.5`), or the signed integer "-2" of
    "IL-2" or "2-3-4"; UNSURE, next to what may be an HTML tag or entity, a URL's scheme
    or a sign. An OTHER that is wrong leaves its lexeme's count short (`marks`: None)."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    then = text[end + 1] if end + 1 < len(text) else " "
    if (before in "<&+" or after == ">" or (before == "/" and text[start - 2:start] == "</")
            or (after == ":" and text.startswith("//", end + 1))):
        return UNSURE
    if before in "/@\\" or after in "/@\\" or (after == "." and then.isalnum()):
        return OTHER
    if before == ".":
        return OTHER if start > 1 and text[start - 2].isalnum() else UNSURE
    if text[start:end].isdigit() and before == "-" and not _chained(text, start - 1):
        return OTHER  # "-2": a signed integer, its own lexeme
    return MARK


def _signed(text: str, lexeme: str) -> list[tuple[int, int]] | None:
    """Where the parser reads the signed integer `lexeme` ("-2"): a hyphen and those
    digits, no more digits or letters after, the hyphen not ending a compound's part, not
    in a path, host or decimal; None next to what may be a tag, entity or sign."""
    out = []
    i = text.find(lexeme)
    while i >= 0:
        end = i + len(lexeme)
        before = text[i - 1] if i else " "
        after = text[end] if end < len(text) else " "
        then = text[end + 1] if end + 1 < len(text) else " "
        if not after.isalnum():
            if before in "<&+" or after == ">":
                return None
            if not (before in "/@\\." or after in "/@\\" or (after == "." and then.isalnum())
                    or _chained(text, i)):
                out.append((i, end))
        i = text.find(lexeme, i + 1)
    return out


# A field's text lower-cased, the lexemes it holds, the word parts that may carry them.
Words = tuple[str, dict[str, int], list[tuple[str, int, int]]]


def words(text: str, language: str, lexemes: Mapping[str, int]) -> Words | None:
    """(the text lower-cased, the lexemes the field holds, the word parts that may carry
    them, in text order); None when lower-casing changed the length. Found once a field:
    `unknown` and `marks_in` both read it."""
    # Only the lexemes the field holds: a word stemmed to one it lacks is one that
    # PostgreSQL reads otherwise, and does not mark either.
    held = {lx: n for lx, n in lexemes.items() if n and _shape(lx) is not None}
    if cjk.is_cjk(language):
        # Han and kana runs are read as bigrams (cjk.marks); here only the other words,
        # with the runs blanked so that none is taken for part of a word.
        text = cjk.mask(text)
        held = {lx: n for lx, n in held.items() if not cjk.has_cjk(lx)}
    low = text.lower()
    if len(low) != len(text):
        return None  # lower-casing changed the length: leave it to PostgreSQL
    if not held:
        return low, held, []
    heads = sorted({h for lx in held if (h := _shape(lx))})
    return low, held, _candidates(low, heads, language != "english")


def unknown(found: Words | None, language: str) -> set[str]:
    """The words of `found` that PostgreSQL has not stemmed for us yet (none for
    "simple", which only lower-cases)."""
    if found is None or language == "simple":
        return set()
    table = _table(language)
    return {w for w, _, _ in found[2] if w not in table}


def wanted(text: str, language: str, lexemes: Mapping[str, int]) -> set[str]:
    """The words `marks` will look up in `text` that PostgreSQL has not stemmed yet."""
    return unknown(words(text, language, lexemes), language)


def marks(text: str, language: str, lexemes: Mapping[str, int]
          ) -> list[tuple[int, int]] | None:
    """The (start, end) of each word of `text` whose lexeme (in `language`) is one of
    `lexemes`, in text order; None unless each lexeme is carried by exactly as many words
    as its count (the index's term frequency of the lexeme in this field; a compound's
    is not checked, it is never marked) and PostgreSQL's parser surely reads each of those
    words as this module does (`_reading`), or when a word is not in the table of words
    PostgreSQL stemmed (`wanted`, `learn`)."""
    return marks_in(words(text, language, lexemes), language)


def marks_in(found: Words | None, language: str) -> list[tuple[int, int]] | None:
    """`marks` over a field's `words`."""
    if found is None:
        return None
    low, held, candidates = found
    if not held:
        return []
    table = None if language == "simple" else _table(language)
    out: list[tuple[int, int]] = []
    counts: dict[str, int] = {}
    n = len(low)
    for word, s, e in candidates:
        lx = word if table is None else table.get(word)
        if lx is None:
            return None  # a word PostgreSQL has not stemmed for us: it marks this one
        if lx in held:
            if (s == 0 or low[s - 1] in _PLAIN) and (e == n or low[e] in _PLAIN) and (
                    word.isalpha()):
                how = MARK  # the common case, spelled out: a word between spaces
            else:
                how = _reading(low, s, e)
            if how == UNSURE:
                return None
            if how == MARK:
                out.append((s, e))
                counts[lx] = counts.get(lx, 0) + 1
    for lx in held:
        if _SIGNED.fullmatch(lx):
            signed = _signed(low, lx)
            if signed is None:
                return None
            out += signed
            counts[lx] = len(signed)
    out.sort()
    if counts != held:
        return None
    return out
