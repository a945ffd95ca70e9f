"""The downgrade gate (internal.matrixd.downgrade): no server needed."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from internal.api.responses import RankedHit
from internal.matrixd import downgrade
from internal.matrixd.downgrade import Rules

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def hit(id_: str, distance: float | None = None, score: float | None = None,
        age_days: float = 0.0, corpus: str = "c") -> RankedHit:
    return RankedHit(id=id_, corpus=corpus, distance=distance, score=score, ranks={},
                     scores={}, text="", title=None, tags=[], metadata={}, language="english",
                     updated_at=NOW - timedelta(days=age_days))


def ids(hits: list[RankedHit]) -> list[str]:
    return [h.id for h in hits]


def test_off_by_default_is_identity() -> None:
    hits = [hit("a", 0.9, age_days=1000), hit("b", 0.1)]
    assert not Rules().active
    assert downgrade.apply(hits, Rules(), "distance", NOW, {("c", "a")}) == 0
    assert ids(hits) == ["a", "b"]
    assert all(h.downgraded is msgspec.UNSET for h in hits)  # absent from the answer


def test_weak_by_distance_in_vector_mode() -> None:
    hits = [hit("a", 0.10), hit("b", 0.60), hit("c", 0.20), hit("d", 0.55), hit("e", 0.50)]
    n = downgrade.apply(hits, Rules(max_distance=0.5), "distance", NOW)
    assert n == 2
    assert ids(hits) == ["a", "c", "e", "b", "d"]  # 0.50 is not above 0.5; order kept in groups
    assert [h.downgraded for h in hits] == [[], [], [], ["weak"], ["weak"]]


def test_max_distance_does_not_apply_to_score_modes() -> None:
    hits = [hit("a", 0.9, score=0.1), hit("b", 0.1, score=0.05)]
    assert downgrade.apply(hits, Rules(max_distance=0.5), "score", NOW) == 0
    assert ids(hits) == ["a", "b"]


def test_weak_by_score_in_score_modes() -> None:
    hits = [hit("a", score=0.9), hit("b", score=0.2), hit("c", score=None), hit("d", score=0.5)]
    n = downgrade.apply(hits, Rules(min_score=0.5), "score", NOW)
    assert n == 1
    assert ids(hits) == ["a", "c", "d", "b"]  # no score: never weak; 0.5 is not below 0.5
    assert hits[-1].downgraded == ["weak"]


def test_min_score_does_not_apply_to_vector_mode() -> None:
    hits = [hit("a", 0.1, score=0.0)]
    assert downgrade.apply(hits, Rules(min_score=0.5), "distance", NOW) == 0


def test_stale_by_age() -> None:
    hits = [hit("old", 0.1, age_days=40), hit("new", 0.2, age_days=2), hit("now", 0.3),
            hit("older", 0.4, age_days=400)]
    n = downgrade.apply(hits, Rules(max_age_days=30), "distance", NOW)
    assert n == 2
    assert ids(hits) == ["new", "now", "old", "older"]
    assert hits[2].downgraded == ["stale"]


def test_stale_reads_the_answers_utc_z_timestamp() -> None:
    """updated_at as vectord's answer carries it, decoded into the hit's datetime."""
    sent = {**msgspec.to_builtins(hit("z", 0.1)), "updated_at": "2026-01-01T00:00:00Z"}
    h = msgspec.json.decode(msgspec.json.encode(sent), type=RankedHit)
    assert h.updated_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert downgrade.reasons(h, Rules(max_age_days=30), "distance", NOW) == ["stale"]


def test_disputed_only_the_marked_answer_and_corpus() -> None:
    hits = [hit("t", 0.1, corpus="docs"), hit("t", 0.2, corpus="wiki"), hit("u", 0.3, corpus="docs")]
    n = downgrade.apply(hits, Rules(disputed=True), "distance", NOW, {("docs", "t")})
    assert n == 1
    assert [(h.corpus, h.id) for h in hits] == [("wiki", "t"), ("docs", "u"), ("docs", "t")]
    assert hits[-1].downgraded == ["disputed"]


def test_disputed_off_ignores_entries() -> None:
    hits = [hit("t", 0.1), hit("u", 0.2)]
    assert downgrade.apply(hits, Rules(max_age_days=30), "distance", NOW, {("c", "t")}) == 0


def test_several_reasons_in_order() -> None:
    hits = [hit("t", 0.9, age_days=90), hit("u", 0.1, age_days=1)]
    downgrade.apply(hits, Rules(max_distance=0.5, max_age_days=30, disputed=True), "distance", NOW,
                    {("c", "t")})
    assert ids(hits) == ["u", "t"]
    assert hits[1].downgraded == ["weak", "stale", "disputed"]


def test_combine_lays_request_over_config() -> None:
    base = Rules(max_distance=0.5, disputed=True)
    got = downgrade.combine(base, {"max_age_days": 7, "disputed": False})
    assert got == Rules(max_distance=0.5, max_age_days=7.0, disputed=False)
    assert downgrade.combine(base, {"max_distance": 0}) == Rules(disputed=True)  # 0 turns it off


@pytest.mark.parametrize(("over", "key"), [
    ({"max_distance": -0.1}, "max_distance"),
    ({"min_score": -1}, "min_score"),
    ({"max_age_days": math.inf}, "max_age_days"),
    ({"max_age_days": "7"}, "max_age_days"),
    ({"disputed": 1}, "disputed"),
    ({"weak": 1}, "weak"),
])
def test_combine_names_the_bad_key(over: dict[str, Any], key: str) -> None:
    with pytest.raises(downgrade.RuleError) as info:
        downgrade.combine(Rules(), over)
    assert info.value.key == key
