"""A model's citation markers checked against the passages it was given (no I/O).

A marker is `[n]` or a list `[n, m]`; each n must name one of the passages (1..count).
One that points nowhere is taken out of the text and counted; a list keeps its valid
numbers. The filter works on a stream: a marker split between two pieces of text is held
until it closes, so what is sent is the checked text, and the text sent in pieces is the
text of the whole answer.
"""

from __future__ import annotations

import re

_MARKER = re.compile(r"\[(\s*\d{1,4}(?:\s*[,;]\s*\d{1,4})*\s*)\]")
_OPEN = re.compile(r"\[[\d\s,;]*$")  # a marker that may still close
MAX_MARKER = 40  # characters: an opening bracket held longer than this is plain text


class MarkerFilter:
    """Checks markers in text fed in pieces; `cited` in order of first mention."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.dropped = 0
        self.cited: list[int] = []
        self._held = ""

    def feed(self, piece: str) -> str:
        """The checked text that can be sent now (a marker still open is held)."""
        text = self._held + piece
        self._held = ""
        tail = _OPEN.search(text)
        if tail is not None and len(text) - tail.start() <= MAX_MARKER:
            text, self._held = text[:tail.start()], text[tail.start():]
        return _MARKER.sub(self._check, text)

    def flush(self) -> str:
        """What is held at the end (an unclosed bracket is plain text)."""
        text, self._held = self._held, ""
        return _MARKER.sub(self._check, text)

    def _check(self, m: re.Match[str]) -> str:
        kept = []
        for part in re.split(r"[,;]", m.group(1)):
            n = int(part)
            if 1 <= n <= self.count:
                kept.append(n)
                if n not in self.cited:
                    self.cited.append(n)
            else:
                self.dropped += 1
        return "".join(f"[{n}]" for n in dict.fromkeys(kept))


def check(text: str, count: int) -> tuple[str, list[int], int]:
    """The text with its markers checked, the passages cited (first mention first), and
    the markers dropped."""
    f = MarkerFilter(count)
    out = f.feed(text) + f.flush()
    return out, f.cited, f.dropped
