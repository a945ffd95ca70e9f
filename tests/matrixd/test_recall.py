"""Which recorded answers ride along as vectord's `include` (internal.matrixd.playbook)."""

from __future__ import annotations

from internal.api.vectord import IncludeRef
from internal.matrixd import playbook
from internal.matrixd.boost import Match, PlaybookEntry


def m(answer: str, corpus: str, score: float, distance: float) -> Match:
    return Match(PlaybookEntry(query_text="q", answer_id=answer, answer_corpus=corpus,
                               score=score), distance)


def test_include_only_raised_answers_of_searched_corpora_nearest_first() -> None:
    lookup = playbook.Lookup("pb", [
        m("a", "docs", 1.0, 0.05),
        m("w", "docs", -1.0, 0.06),   # wrong: never injected
        m("z", "docs", 0.0, 0.07),    # no effect: not injected
        m("o", "other", 1.0, 0.08),   # corpus not searched
        m("b", "wiki", 0.5, 0.09),
        m("a", "docs", 0.7, 0.10),    # the same answer again: once
        m("c", "docs", -0.5, 0.01),   # nearer wrong mark decides against c
        m("c", "docs", 1.0, 0.20),
    ])
    assert lookup.include(["docs", "wiki"]) == [IncludeRef(corpus="docs", id="a"),
                                                IncludeRef(corpus="wiki", id="b")]


def test_include_is_capped() -> None:
    lookup = playbook.Lookup("pb", [m(f"d{i}", "docs", 1.0, i / 1000) for i in range(150)])
    got = lookup.include(["docs"])
    assert len(got) == playbook.MAX_INCLUDE
    assert got[0] == IncludeRef(corpus="docs", id="d0")


def test_mark_recalled() -> None:
    hits = [{"id": "a", "included": True}, {"id": "b"}, {"id": "c", "included": False}]
    assert playbook.mark_recalled(hits) == 1
    assert hits == [{"id": "a", "from_playbook": True}, {"id": "b", "from_playbook": False},
                    {"id": "c", "from_playbook": False}]
