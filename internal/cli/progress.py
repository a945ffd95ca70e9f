"""Progress of a long command (ingest, sync): a bar on a terminal, plain lines elsewhere.

tqdm redraws its bar with a carriage return many times a second; written to a file or a
pipe, every frame piles up on one line. There the progress is a line of its own every
few seconds (and one at the end), which a log or `tail -f` reads as it comes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Protocol

PLAIN_EVERY = 5.0  # seconds between two plain lines


class Progress(Protocol):
    """What the commands use of a tqdm bar."""

    n: float
    total: float | None

    def update(self, n: float = 1) -> bool | None: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...


class PlainProgress:
    """tqdm's calls the commands make, written as `desc: n/total unit (p%) postfix` lines:
    the first update's, then at most one every `every` seconds, and the last at close
    when it says something new."""

    def __init__(self, total: float | None, *, initial: float = 0, unit: str = "it",
                 desc: str = "", disable: bool = False, file: IO[str] | None = None,
                 every: float = PLAIN_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self.n = initial
        self._initial = initial  # done before this run: not in its rate
        self.total = total
        self.unit = unit
        self.desc = desc
        self.disable = disable
        self.file = file if file is not None else sys.stderr
        self.every = every
        self.clock = clock
        self.postfix = ""
        self._started = clock()
        self._last: float | None = None
        self._said: str | None = None  # the count and postfix of the last line written
        self._closed = False

    def line(self) -> str:
        """The progress now, as one line."""
        done = f"{self.n:g}/{self.total:g}" if self.total else f"{self.n:g}"
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        seconds = self.clock() - self._started
        fresh = self.n - self._initial
        rate = f", {fresh / seconds:.1f} {self.unit}/s" if seconds > 0 and fresh else ""
        tail = f" [{self.postfix}]" if self.postfix else ""
        return f"{self.desc + ': ' if self.desc else ''}{done} {self.unit}{share}" \
               f" in {seconds:.0f}s{rate}{tail}"

    def _write(self) -> None:
        if self.disable:
            return
        self._last = self.clock()
        self._said = f"{self.n} {self.postfix}"
        print(self.line(), file=self.file, flush=True)

    def update(self, n: float = 1) -> bool | None:
        self.n += n
        if self._last is None or self.clock() - self._last >= self.every:
            self._write()
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def refresh(self) -> None:
        """A terminal's redraw: nothing for plain lines (the next due line shows it)."""

    def close(self) -> None:
        """The last line, unless the last one written said it already (a run with nothing
        to do prints one line, not two)."""
        if not self._closed:
            self._closed = True
            if self._said != f"{self.n} {self.postfix}":
                self._write()


def bar(total: float | None, *, initial: float = 0, unit: str, desc: str,
        disable: bool = False, file: IO[str] | None = None) -> Progress:
    """A tqdm bar when `file` (stderr by default) is a terminal, else plain lines."""
    out = file if file is not None else sys.stderr
    if out.isatty():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, unit=unit, desc=desc, disable=disable,
                    file=out)
    return PlainProgress(total, initial=initial, unit=unit, desc=desc, disable=disable,
                         file=out)
