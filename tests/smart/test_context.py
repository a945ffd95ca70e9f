"""A turn judged with its neighbours (internal.understanding.context), pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from internal.api.responses import RankedHit
from internal.understanding import context


def ranked(id_: str, score: float, metadata: dict[str, Any], corpus: str = "talk") -> RankedHit:
    return RankedHit(id=id_, corpus=corpus, distance=None, score=score, ranks={}, scores={},
                     text="", title=None, tags=[], metadata=metadata, language="english",
                     updated_at=datetime(2026, 1, 1, tzinfo=UTC))


def hit(id_: str, score: float, session: Any = 1, turn: Any = None, corpus: str = "talk"
        ) -> RankedHit:
    meta: dict[str, Any] = {"session": session}
    if turn is not None:
        meta["turn"] = turn
    return ranked(id_, score, meta, corpus)


def ids(hits: list[RankedHit]) -> list[str]:
    return [h.id for h in hits]


def test_the_answer_borrows_from_the_question_before_it() -> None:
    # D1:5 answers D1:4 ("What kind of yoga is it?"); D2:9 matches a little more on its
    # own than the answer does, and the answer passes it.
    hits = [hit("D1:4", 1.0, 1, 4), hit("D2:9", 0.6, 2, 9), hit("D1:5", 0.5, 1, 5)]
    out = context.smooth(hits)
    assert ids(out) == ["D1:4", "D1:5", "D2:9"]
    by = {h.id: h.context_score for h in out}
    assert by["D1:5"] == pytest.approx(0.5 + 0.5 * 1.0)  # the turn before, weight 0.5
    assert by["D1:4"] == pytest.approx(1.0 + 0.3 * 0.5)  # the turn after, weight 0.3
    assert by["D2:9"] == pytest.approx(0.6)


def test_two_away_counts_and_three_away_does_not() -> None:
    out = context.smooth([hit("a", 1.0, 1, 1), hit("b", 0.1, 1, 3), hit("c", 0.1, 1, 4)])
    by = {h.id: h.context_score for h in out}
    assert by["b"] == pytest.approx(0.1 + 0.2 * 1.0 + 0.3 * 0.1)
    assert by["c"] == pytest.approx(0.1 + 0.5 * 0.1)  # "a" is three turns before


def test_neighbours_only_in_the_same_thread_and_corpus() -> None:
    hits = [hit("a", 1.0, 1, 4), hit("b", 0.5, 2, 5), hit("c", 0.5, 1, 5, corpus="other")]
    out = context.smooth(hits)
    assert [h.context_score for h in out] == [1.0, 0.5, 0.5]
    assert ids(out) == ["a", "b", "c"]  # ties keep the given order


def test_hits_without_a_place_keep_their_order_and_scores() -> None:
    hits = [hit("x", 0.9), ranked("y", 0.8, {}, "wiki"),
            hit("z", 0.7, turn=True)]  # a bool is no position
    out = context.smooth(hits)
    assert ids(out) == ["x", "y", "z"]
    assert [h.score for h in out] == [0.9, 0.8, 0.7]
    assert hits[0].context_score is msgspec.UNSET  # the input is not changed


def test_positions_as_digit_strings_and_other_field_names() -> None:
    hits = [ranked("q", 1.0, {"thread": "t", "seq": "7"}, "c"),
            ranked("x", 0.8, {"thread": "u", "seq": "1"}, "c"),
            ranked("a", 0.4, {"thread": "t", "seq": "8"}, "c")]
    out = context.smooth(hits, group="thread", position="seq")
    assert ids(out) == ["q", "a", "x"]
    assert context.place(hits[0], "session", "turn") is None


def test_windows_take_the_turns_around_in_the_same_thread() -> None:
    texts = ["a1", "a2", "a3", "a4", "b1", "b2", "x"]
    threads: list[object | None] = [1, 1, 1, 1, 2, 2, None]
    out = context.windows(texts, threads, before=2, after=1)
    assert out[0] == "a1\na2"
    assert out[2] == "a3\na1\na2\na4"  # the turn first, then its neighbours in order
    assert out[3] == "a4\na2\na3"  # nothing after the thread's end
    assert out[4] == "b1\nb2"  # nothing from thread 1
    assert out[6] == "x"  # no thread: as it is
    assert context.windows(texts, threads, before=0, after=0) == texts


def test_windows_refuse_bad_arguments() -> None:
    with pytest.raises(ValueError, match="length"):
        context.windows(["a"], [])
    with pytest.raises(ValueError, match="negative"):
        context.windows(["a"], [1], before=-1)


def test_items_indexed_with_their_window_are_not_smoothed_again() -> None:
    hits = [hit("a", 1.0, 1, 4), hit("b", 0.5, 1, 5)]
    hits[1].metadata["context_window"] = "2:1"
    out = context.smooth(hits)
    assert [h.context_score for h in out] == [1.0, 0.5]


def test_the_ranking_key_is_merge_score_when_there_is_one() -> None:
    # A playbook boost or a corpus weight lives in merge_score: the re-ranking keeps it.
    a, b = hit("a", 0.9, 1, 1), hit("b", 0.5, 2, 1)
    a.merge_score, b.merge_score = 0.45, 1.0
    out = context.smooth([b, a])
    assert ids(out) == ["b", "a"]
    assert [h.context_score for h in out] == [1.0, 0.45]
