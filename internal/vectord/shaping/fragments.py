"""Highlight fragments (no I/O): PostgreSQL's ts_headline output made safe to show.

PostgreSQL marks the words (`ts_headline`, with each item's own regconfig, so the marks
are the lexical layer's stemming) between two sentinel characters; here the marked text
is cut into the best fragments, HTML-escaped, and only then are the marks written with
the caller's `pre` and `post`. So a stored `<script>` comes back as `&lt;script&gt;` and
the only markup in a fragment is the marks the caller asked for. The sentinels are
removed from the stored text before PostgreSQL sees it (shaping_sql), so a stored
sentinel can never open a mark.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right

START = "\x02"
STOP = "\x03"
SENTINELS = START + STOP

LEXICAL = "lexical"  # the query's words, marked as the lexical layer matched them
LEAD = "lead"  # no query word in the field: its beginning, unmarked

_SPACE = re.compile(r"\s+")
_MARKS = re.compile(f"([{START}{STOP}])")


def headline_options() -> str:
    """ts_headline's options: the whole field with every matched word marked.

    Fragments are cut here (`best`), not by ts_headline, whose fragment mode drops the
    tokens its parser reads as markup: a stored `<script>` must come back escaped, not
    vanish."""
    return f"StartSel={START}, StopSel={STOP}, HighlightAll=true"


def spans(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """The plain text and the (start, end) of each marked word in it."""
    plain: list[str] = []
    out: list[tuple[int, int]] = []
    pos = 0
    start = -1
    for piece in _MARKS.split(marked):
        if piece == START:
            start = pos
        elif piece == STOP:
            if start >= 0:
                out.append((start, pos))
            start = -1
        else:
            plain.append(piece)
            pos += len(piece)
    return "".join(plain), out


def best(marked: str, pre: str, post: str, fragment_chars: int, fragments: int) -> list[str]:
    """The best fragments of a field ts_headline marked (`best_of`)."""
    text, marks = spans(marked)
    return best_of(text, marks, pre, post, fragment_chars, fragments)


def best_of(text: str, marks: list[tuple[int, int]], pre: str, post: str,
            fragment_chars: int, fragments: int) -> list[str]:
    """The best fragments of a text with these marked words ((start, end), in text
    order, not overlapping), best first: those holding the most distinct marked words
    (then the most marks, then the earliest), not overlapping; escaped, with pre/post
    around the marks. Empty when nothing is marked."""
    if not marks:
        return []
    if len(text) <= fragment_chars:  # every mark's window is the whole text
        return [_render(text, 0, len(text), marks, pre, post)]
    starts = [s for s, _ in marks]
    ends = [e for _, e in marks]
    scored = []
    # Each mark's window: about `size` characters around it, at word boundaries, a third
    # of the room before it; a mark the edges would cut is left out whole (the marks are
    # in text order and do not overlap, so the one an edge falls in is found by
    # bisection). Spelled out in the loop with comparisons, not min/max: it runs once
    # per mark of every hit shown.
    n = len(text)
    size = fragment_chars
    find, rfind = text.find, text.rfind
    words: list[str] | None = None
    for i in range(len(marks)):
        s, e = starts[i], ends[i]
        width = e - s
        lo = s - (size - width) // 3 if size > width else s
        if lo < 0:
            lo = 0
        hi = lo + (size if size > width else width)
        if hi > n:
            hi = n
        if hi - size < lo:
            lo = hi - size if hi > size else 0
        if lo > 0:
            cut = find(" ", lo, s)
            if cut >= 0:
                lo = cut + 1
        if hi < n:
            cut = rfind(" ", e, hi)
            if cut >= 0:
                hi = cut
        j = bisect_left(starts, hi) - 1
        if j >= 0 and hi < ends[j]:
            hi = starts[j]
        # The first mark starting at or after lo; still so once lo moves past the mark it
        # cuts, as the marks do not overlap.
        a = bisect_left(starts, lo)
        if a and lo < ends[a - 1]:
            lo = ends[a - 1]
        b = bisect_right(ends, hi)
        if b < a:
            b = a
        # A window of one mark holds one distinct word; `i` keeps ties in text order.
        if b - a > 1:
            if words is None:
                words = [text[s:e].lower() for s, e in marks]
            scored.append((-len(set(words[a:b])), a - b, lo, i, hi, a, b))
        else:
            scored.append((a - b, a - b, lo, i, hi, a, b))
    scored.sort()
    chosen: list[tuple[int, int, list[tuple[int, int]]]] = []
    for _, _, lo, _, hi, a, b in scored:
        if len(chosen) == fragments:
            break
        if a < b and all(hi <= clo or lo >= chi for clo, chi, _ in chosen):
            chosen.append((lo, hi, marks[a:b]))
    return [_render(text, lo, hi, inside, pre, post) for lo, hi, inside in chosen]


def _render(text: str, lo: int, hi: int, inside: list[tuple[int, int]], pre: str,
            post: str) -> str:
    """text[lo:hi] escaped, its marks between pre and post: the marks laid in as the
    sentinels (which the text no longer holds), escaped in one pass, then replaced."""
    parts = ["…" if lo > 0 else ""]
    pos = lo
    for s, e in inside:
        parts += [text[pos:s], START, text[s:e], STOP]
        pos = e
    parts += [text[pos:hi], "…" if hi < len(text) else ""]
    marked = "".join(parts)
    # The sentinels are not printable, so `_flat` would run the regular expression on
    # every fragment; the window's own text says whether there is whitespace to fold.
    window = text[lo:hi]
    if not (window.isprintable() and "  " not in window):
        marked = _SPACE.sub(" ", marked)
    return html.escape(marked, quote=True).replace(START, pre).replace(STOP, post).strip()


def _flat(text: str) -> str:
    """Each run of whitespace one space. Most text has none but single spaces: every
    other whitespace character is unprintable, so `isprintable` (a C loop) finds them
    without running the regular expression on every fragment."""
    return text if text.isprintable() and "  " not in text else _SPACE.sub(" ", text)


def lead(text: str, fragment_chars: int) -> list[str]:
    """The field's beginning, at most fragment_chars, cut at a word's end; escaped."""
    flat = _flat(strip_sentinels(text)).strip()
    if not flat:
        return []
    if len(flat) > fragment_chars:
        cut = flat.rfind(" ", 0, fragment_chars + 1)
        flat = flat[:cut if cut > 0 else fragment_chars] + "…"
    return [html.escape(flat, quote=True)]


def strip_sentinels(text: str) -> str:
    """The text without the sentinel characters (each becomes a space)."""
    if START not in text and STOP not in text:
        return text
    return text.translate(_NO_SENTINELS)


_NO_SENTINELS = {ord(c): " " for c in SENTINELS}
