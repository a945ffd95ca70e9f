"""Shaped results in the terminal (no I/O): bold marks on a TTY, escapes undone."""

from __future__ import annotations

from internal.cli import shaped


def test_fragments_bold_on_a_tty_plain_elsewhere() -> None:
    frag = "the <mark>printer</mark> &lt;script&gt;\x1b[31m"
    assert shaped.fragment(frag, tty=True) == "the \x1b[1mprinter\x1b[0m <script>[31m"
    assert shaped.fragment(frag, tty=False) == "the printer <script>[31m"
    lines = shaped.hit_lines(2, {"text": ["a <mark>b</mark>", "c"]},
                             {"key": "p.md", "hits": [], "count": 3}, tty=False)
    assert lines == ["  2  a b … c", "     3 hits in p.md"]
    assert shaped.hit_lines(1, None, None, tty=True) == []
    assert shaped.facet_lines({"tags": {"a": 2, "b": 1}, "type": {}}) == [
        "tags: a (2), b (1)", "type: none"]


def test_options_from_the_command_line() -> None:
    assert shaped.options(False, None, None, None) == {}
    assert shaped.options(True, "parent", shaped.csv("corpus, tags"), 0.5) == {
        "highlight": True, "group_by": "parent", "facets": ["corpus", "tags"], "diversity": 0.5}
