"""Progress written to a file or a pipe: whole lines every few seconds, not tqdm's frames;
and `lakehouse --version`."""

from __future__ import annotations

import io
import subprocess
import sys
from importlib.metadata import version

from internal.cli.progress import PlainProgress, bar
from tests.helpers import ROOT


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_every_few_seconds_and_one_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    progress = PlainProgress(1000, initial=100, unit="doc", desc="tldr", file=out, every=5.0,
                             clock=clock)
    progress.set_postfix_str("batch 64", refresh=False)
    for _ in range(90):  # 90 updates over 18 s: a line at the first, then every 5 s
        clock.now += 0.2
        progress.update(10)
    progress.close()
    progress.close()  # once only
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "tldr: 110/1000 doc (11%) in 0s, 50.0 doc/s [batch 64]"
    assert len(lines) == 5, lines  # at 0.2 s, 5.2 s, 10.2 s, 15.2 s, and the end
    assert lines[-1] == "tldr: 1000/1000 doc (100%) in 18s, 50.0 doc/s [batch 64]"


def test_a_total_learnt_late_and_quiet() -> None:
    out, clock = io.StringIO(), Clock()
    progress = PlainProgress(0, unit="chunk", desc="sync wiki", file=out, clock=clock)
    progress.total = 8
    progress.update(8)
    progress.close()
    assert out.getvalue().splitlines()[-1] == "sync wiki: 8/8 chunk (100%) in 0s"
    silent = io.StringIO()
    quiet = PlainProgress(3, unit="doc", file=silent, disable=True)
    quiet.update(3)
    quiet.close()
    assert silent.getvalue() == ""


def test_a_terminal_gets_the_bar_and_anything_else_plain_lines() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(bar(3, unit="doc", desc="x", file=io.StringIO()), PlainProgress)
    shown = bar(3, unit="doc", desc="x", file=Tty())
    assert not isinstance(shown, PlainProgress)
    shown.close()


def test_version_names_both_distributions() -> None:
    done = subprocess.run([sys.executable, "-m", "internal.cli.main", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"lakehouse {version('lakehouse')} "
                                   f"(lakehouse-client {version('lakehouse-client')})")
