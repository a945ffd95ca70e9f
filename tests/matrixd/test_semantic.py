"""Semantic fragments' passages and choice (no I/O)."""

from __future__ import annotations

from internal.matrixd.semantic import MAX_PASSAGES, best, passages


def test_passages_pack_sentences_and_cut_long_ones() -> None:
    text = "One two. Three four five.  Six\nseven. " + "word " * 30
    got = passages(text, 20)
    assert got[:3] == ["One two.", "Three four five.", "Six seven."]
    assert all(len(p) <= 20 for p in got)
    assert len(passages("a. " * 100, 2)) == MAX_PASSAGES
    assert passages("", 20) == []


def test_best_is_the_most_similar() -> None:
    assert best([1.0, 0.0], [[0.0, 1.0], [0.9, 0.1], [-1.0, 0.0]]) == 1
