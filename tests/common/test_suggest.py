"""The nearest corpus name to a mistyped one."""

from __future__ import annotations

from internal.common.suggest import did_you_mean, edit_distance, nearest

NAMES = ["handbook", "tickets", "wiki", "playbook"]


def test_edit_distance_counts_a_swap_as_one() -> None:
    assert edit_distance("handbok", "handbook") == 1
    assert edit_distance("hnadbook", "handbook") == 1
    assert edit_distance("", "abc") == 3
    assert edit_distance("same", "same") == 0


def test_nearest_names_a_close_corpus_only() -> None:
    assert nearest("handbok", NAMES) == "handbook"
    assert nearest("tikcets", NAMES) == "tickets"
    assert nearest("wik", NAMES) == "wiki"
    assert nearest("finance", NAMES) is None
    assert nearest("wiki", NAMES) is None  # the name itself is no suggestion
    assert did_you_mean("handbok", NAMES) == " (did you mean 'handbook'?)"
    assert did_you_mean("finance", NAMES) == ""
