"""Which recorded answers ride along as vectord's `include` (internal.matrixd.playbook)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from internal.api.responses import RankedHit
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
    """`included` gives way to `from_playbook` in the answer (the key, not only its value)."""
    hits = [hit("a", included=True), hit("b"), hit("c", included=False)]
    assert playbook.mark_recalled(hits) == 1
    answer = [msgspec.to_builtins(h) for h in hits]
    assert [(h["id"], h["from_playbook"]) for h in answer] == [("a", True), ("b", False),
                                                                ("c", False)]
    assert all("included" not in h for h in answer)
    assert list(answer[0])[-5:] == ["corpus_rank", "from_playbook", "boost_factor",
                                    "original_distance", "rank"]  # the order they are set in


def hit(id_: str, included: bool = False) -> RankedHit:
    return RankedHit(id=id_, corpus="c", distance=0.1, score=None, ranks={}, scores={}, text="",
                     title=None, tags=[], metadata={}, language="english",
                     updated_at=datetime(2026, 1, 1, tzinfo=UTC), included=included)
