"""Exact names first, the pure part (search/names.py): id stems, the classes of a
candidate's title against the question's lexemes, and the order they give."""

from __future__ import annotations

from internal.vectord.search import names


def test_id_stem_is_the_name_the_id_says() -> None:
    assert names.id_stem("linux/ss.md#0") == "ss"
    assert names.id_stem("ss.md") == "ss"
    assert names.id_stem("Journalctl") == "journalctl"
    assert names.id_stem("a/b.c/tar.gz#3") == "tar"
    assert names.stem_matches(["at.md#0", "atop.md#0", "cat.md#0"], "  At ") == ["at.md#0"]
    assert names.stem_matches(["at.md#0"], "   ") == []


def test_title_classes() -> None:
    n, dfs = 1000.0, {"journalctl": 5.0, "log": 300.0, "servic": 200.0, "file": 400.0,
                      "ss": 4.0, "useradd": 3.0}
    titles = {
        "journalctl": ({"journalctl": 1}, 1),
        "journalctl-extra": ({"journalctl": 1}, 2),  # a title word the question lacks
        "file": ({"file": 1}, 1),
        "useradd": ({"useradd": 1}, 1),
        "logs": ({"log": 1}, 1),
    }
    # The question is the title: exact.
    assert names.classes(titles, ["journalctl"], set(), n, dfs) == {"journalctl": names.EXACT}
    # The question contains a rare title: contained; a common word's title is not a name.
    got = names.classes(titles, ["journalctl", "log", "file", "servic"], set(), n, dfs)
    assert got == {"journalctl": names.CONTAINED}
    # A title matched through a corrected term only.
    assert names.classes(titles, ["useradd"], {"useradd"}, n, dfs) == {"useradd": names.CORRECTED}


def test_named_candidates_rank_first_by_class_then_by_fused_score() -> None:
    order = [(0.9, "a"), (0.8, "b"), (0.7, "c"), (0.6, "d")]
    got = names.ranked(order, {"c": names.CONTAINED, "d": names.EXACT, "b": names.CONTAINED})
    assert [k for _, k in got] == ["d", "b", "c", "a"]
    assert [s for s, _ in got] == sorted((s for s, _ in got), reverse=True)
