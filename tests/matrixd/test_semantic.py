"""Semantic fragments' passages (no I/O)."""

from __future__ import annotations

from internal.matrixd.semantic import MAX_PASSAGES, passages


def test_passages_pack_sentences_and_cut_long_ones() -> None:
    text = "One two. Three four five.  Six\nseven. " + "word " * 30
    got = passages(text, 20)
    assert got[:3] == ["One two.", "Three four five.", "Six seven."]
    assert all(len(p) <= 20 for p in got)
    assert len(passages("a. " * 100, 2)) == MAX_PASSAGES
    assert passages("", 20) == []

