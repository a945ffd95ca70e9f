"""Chinese and Japanese words as the lexical layer reads them (no I/O): character bigrams.

PostgreSQL reads a run of Han or kana characters as one word, so vectord cuts each run
into overlapping bigrams before its parser sees the text (lexical/functions.sql,
`vectord_cjk_split`, for items stored as `chinese` or `japanese` and for every
question). This is the same cut in Python, for highlights: the bigrams of a field that
are query lexemes are marked, overlapping ones joined into one mark. Pinned equal to the
SQL by tests/vectord/test_cjk.py.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

from internal.common.language import CJK_REGCONFIGS

# Must match vectord_cjk_split's character class (after NFKC).
_RUN = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Characters vectord_cjk_split looks for before it cuts anything (the runs', plus the
# full-width forms NFKC folds).
_ANY = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                  "\uff00-\uffef]")

Spans = list[tuple[int, int]]


def is_cjk(language: str) -> bool:
    """Whether items of this language are cut into bigrams."""
    return language in CJK_REGCONFIGS


def has_cjk(text: str) -> bool:
    return _ANY.search(text) is not None


def share(text: str) -> float:
    """The share of the text's letters that are read as bigrams (Han and kana)."""
    letters = sum(1 for c in text if c.isalpha())
    return sum(len(r) for r in _RUN.findall(text)) / letters if letters else 0.0


def folded(text: str) -> str | None:
    """The text as vectord_cjk_split reads it (NFKC), one character for one; None when
    NFKC changes the length (half-width kana with their voicing marks, ligatures), where
    positions could not be mapped back."""
    out = unicodedata.normalize("NFKC", text)
    return out if len(out) == len(text) else None


def bigrams(text: str) -> list[tuple[str, int, int]]:
    """Each lexeme the split gives of `text`'s Han and kana runs, with its (start, end) in
    the text: a run's overlapping bigrams, a lone character as itself."""
    norm = folded(text) if has_cjk(text) else None
    if norm is None:
        return []
    out: list[tuple[str, int, int]] = []
    for m in _RUN.finditer(norm):
        run, start = m.group(), m.start()
        if len(run) == 1:
            out.append((run, start, start + 1))
            continue
        out += [(run[i:i + 2], start + i, start + i + 2) for i in range(len(run) - 1)]
    return out


def marks(text: str, lexemes: Collection[str]) -> Spans:
    """Where the query's bigram lexemes stand in `text`, overlapping ones joined, in
    text order."""
    out: Spans = []
    for lexeme, s, e in bigrams(text):
        if lexeme in lexemes:
            if out and s < out[-1][1]:
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
    return out


def mask(text: str) -> str:
    """The text with its Han and kana characters blanked (positions kept), so the word
    marks of the other scripts never take a run for part of a word."""
    return _RUN.sub(lambda m: " " * len(m.group()), text) if has_cjk(text) else text


def merged(a: Spans, b: Spans) -> Spans:
    """Two mark lists as one, in text order, overlapping marks joined."""
    if not b:
        return a
    if not a:
        return b
    out: Spans = []
    for s, e in sorted(a + b):
        if out and s < out[-1][1]:
            out[-1] = (out[-1][0], max(e, out[-1][1]))
        else:
            out.append((s, e))
    return out
