"""Playbook boost math (internal.matrixd.boost): no server needed."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from internal.api.responses import RankedHit
from internal.matrixd import boost
from internal.matrixd.boost import PlaybookEntry


def entry(answer_id: str, corpus: str, score: float, query: str = "q") -> PlaybookEntry:
    return PlaybookEntry(query_text=query, answer_id=answer_id, answer_corpus=corpus, score=score)


def hit(id_: str, corpus: str, distance: float | None = None,
        merge_score: float | None = None) -> RankedHit:
    return RankedHit(id=id_, corpus=corpus, distance=distance, score=None, ranks={},
                     scores={}, text="", title=None, tags=[], metadata={"k": id_},
                     language="english", updated_at=datetime(2026, 1, 1, tzinfo=UTC),
                     merge_score=merge_score)


@pytest.mark.parametrize(("score", "expected"), [(0.0, 1.0), (0.25, 0.875), (0.5, 0.75), (1.0, 0.5),
                                               (-0.5, 1.25), (-1.0, 1.5)])
def test_factor(score: float, expected: float) -> None:
    assert boost.factor(score) == expected


def test_perfect_score_halves_exactly() -> None:
    d = 0.123456789012345
    hits = [hit("a", "c", d)]
    boost.apply(hits, [entry("a", "c", 1.0)], "distance")
    assert hits[0].distance == d * 0.5
    assert hits[0].original_distance == d
    assert hits[0].boost_factor == 0.5


@pytest.mark.parametrize("bad", [-1.01, 1.01, math.nan, math.inf, -math.inf])
def test_invalid_score_rejected(bad: float) -> None:
    with pytest.raises(ValueError):
        boost.factor(bad)
    with pytest.raises(ValueError):
        boost.validate_score(bad)


def test_no_entries_is_identity() -> None:
    hits = [hit("a", "c", 0.1), hit("b", "c", 0.2), hit("x", "d", 0.3)]
    before = [(h.id, h.distance) for h in hits]
    assert boost.apply(hits, [], "distance") == 0
    assert [(h.id, h.distance) for h in hits] == before
    assert all(h.boost_factor == 1.0 for h in hits)
    assert all(h.original_distance == h.distance for h in hits)


def test_zero_score_is_identity() -> None:
    hits = [hit("a", "c", 0.1), hit("b", "c", 0.2)]
    assert boost.apply(hits, [entry("b", "c", 0.0)], "distance") == 0
    assert [h.id for h in hits] == ["a", "b"]
    assert hits[1].distance == 0.2


def test_boosted_hit_moves_up_by_distance() -> None:
    hits = [hit("a", "c", 0.30), hit("b", "c", 0.35), hit("t", "c", 0.50)]
    assert boost.apply(hits, [entry("t", "c", 1.0)], "distance") == 1
    assert [h.id for h in hits] == ["t", "a", "b"]
    assert hits[0].distance == 0.25
    assert hits[0].original_distance == 0.50


def test_boosted_hit_moves_up_by_score() -> None:
    hits = [hit("a", "c", merge_score=0.030), hit("t", "c", merge_score=0.020)]
    assert boost.apply(hits, [entry("t", "c", 1.0)], "score") == 1
    assert [h.id for h in hits] == ["t", "a"]
    assert hits[0].merge_score == 0.040  # score / 0.5: the same factor, the same cap
    assert hits[0].original_merge_score == 0.020


def test_highest_score_wins_among_duplicates() -> None:
    entries = [entry("t", "c", 0.2, "q1"), entry("t", "c", 0.9, "q2"), entry("t", "c", 0.5, "q3")]
    assert boost.best_scores(entries) == {("c", "t"): 0.9}
    hits = [hit("t", "c", 1.0)]
    boost.apply(hits, entries, "distance")
    assert hits[0].boost_factor == pytest.approx(0.55)
    assert hits[0].distance == pytest.approx(0.55)


def test_id_match_in_another_corpus_never_counts() -> None:
    hits = [hit("a", "docs", 0.1), hit("t", "docs", 0.4), hit("t", "wiki", 0.5)]
    assert boost.apply(hits, [entry("t", "wiki", 1.0)], "distance") == 1
    by_key = {(h.corpus, h.id): h for h in hits}
    assert by_key[("docs", "t")].boost_factor == 1.0
    assert by_key[("docs", "t")].distance == 0.4
    assert by_key[("wiki", "t")].distance == 0.25
    assert [(h.corpus, h.id) for h in hits] == [("docs", "a"), ("wiki", "t"), ("docs", "t")]


def test_metadata_untouched() -> None:
    hits = [hit("t", "c", 0.4)]
    boost.apply(hits, [entry("t", "c", 1.0)], "distance")
    assert hits[0].metadata == {"k": "t"}


def test_entry_json_round_trip() -> None:
    e = PlaybookEntry(query_text="how do I \"retire\"?\n", answer_id="doc-1/§2",
                      answer_corpus="docs", score=0.75, tags=["ops", "ünïcode"])
    assert boost.entry_from_json(boost.entry_to_json(e)) == e
    assert boost.entry_from_metadata(boost.entry_to_metadata(e)) == e


def test_entry_from_bad_metadata_is_none() -> None:
    assert boost.entry_from_metadata({"query_text": "q"}) is None
    bad = {"query_text": "q", "answer_id": "a", "answer_corpus": "c", "score": 2.0}
    assert boost.entry_from_metadata(bad) is None
    wrong = {"query_text": "q", "answer_id": "a", "answer_corpus": "c", "score": -1.0}
    assert boost.entry_from_metadata(wrong) == PlaybookEntry("q", "a", "c", -1.0)


def test_playbook_id_deterministic_and_unambiguous() -> None:
    a = boost.playbook_id("q", "a", "c")
    assert a == boost.playbook_id("q", "a", "c")
    assert len(a) == 64
    assert boost.playbook_id("a|b", "c", "d") != boost.playbook_id("a", "b|c", "d")
    assert boost.playbook_id("ab", "c", "d") != boost.playbook_id("a", "bc", "d")
    assert boost.playbook_id("q", "a", "c") != boost.playbook_id("q", "a", "c2")


# ---- negative feedback -----------------------------------------------------------

def test_wrong_mark_multiplies_distance_by_exactly_1_5() -> None:
    d = 0.123456789012345
    hits = [hit("t", "c", d), hit("a", "c", 0.15), hit("b", "c", 0.2)]
    assert boost.apply(hits, [entry("t", "c", -1.0)], "distance") == 0  # pushed down, not boosted
    t = next(h for h in hits if h.id == "t")
    assert t.distance == d * 1.5
    assert t.original_distance == d
    assert t.boost_factor == 1.5
    assert [h.id for h in hits] == ["a", "t", "b"]  # 0.185 sorts between 0.15 and 0.2


def test_wrong_mark_divides_score_by_exactly_1_5() -> None:
    hits = [hit("t", "c", merge_score=0.030), hit("a", "c", merge_score=0.025)]
    boost.apply(hits, [entry("t", "c", -1.0)], "score")
    assert [h.id for h in hits] == ["a", "t"]
    assert hits[1].merge_score == 0.030 / 1.5
    assert hits[1].original_merge_score == 0.030


def test_strongest_wins_among_negative_entries() -> None:
    entries = [entry("t", "c", -0.2, "q1"), entry("t", "c", -0.8, "q2")]
    assert boost.best_scores(entries) == {("c", "t"): -0.8}


def test_zero_and_positive_keep_highest_wins() -> None:
    entries = [boost.Match(entry("t", "c", 0.0, "q1"), 0.01), boost.Match(entry("t", "c", 0.6, "q2"), 0.3)]
    assert boost.best_scores(entries) == {("c", "t"): 0.6}


@pytest.mark.parametrize(("d_neg", "d_pos", "winner"), [(0.1, 0.2, -1.0), (0.3, 0.2, 1.0)])
def test_nearer_question_wins_between_signs(d_neg: float, d_pos: float, winner: float) -> None:
    matches = [boost.Match(entry("t", "c", -1.0, "wrong for this"), d_neg),
               boost.Match(entry("t", "c", 1.0, "right for that"), d_pos)]
    assert boost.best_scores(matches) == {("c", "t"): winner}
    assert boost.best_scores(list(reversed(matches))) == {("c", "t"): winner}


def test_disputed_lists_answers_with_a_negative_entry() -> None:
    matches = [boost.Match(entry("t", "c", -0.5), 0.3), boost.Match(entry("t", "c", 1.0), 0.1),
               boost.Match(entry("u", "c", 1.0), 0.1), boost.Match(entry("t", "d", 0.0), 0.1)]
    assert boost.disputed(matches) == {("c", "t")}


def test_boost_keeps_downgrade_groups() -> None:
    hits = [hit("a", "c", 0.3), hit("b", "c", 0.4), hit("t", "c", 0.2)]
    hits[2].downgraded = ["weak"]
    hits[0].downgraded = hits[1].downgraded = []
    assert boost.apply(hits, [entry("t", "c", 1.0)], "distance") == 1
    assert [h.id for h in hits] == ["a", "b", "t"]  # 0.1 but downgraded: stays below
