"""Query analysis with the real pipeline: entities, dates, type, complexity, sub-queries."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from spacy.language import Language

from internal.api.responses import TemporalRange
from internal.understanding import temporal
from internal.understanding.analyze import analyze

NOW = datetime(2023, 5, 8, 13, 56)  # a Monday


def test_entities_typed(pipeline: Language) -> None:
    a = analyze(pipeline, "Where did John and Sarah meet when they worked at Microsoft in Paris?",
                NOW).to_wire()
    types = {e.name: e.type for e in a.entities}
    assert types["John"] == "person" and types["Sarah"] == "person"
    assert types["Microsoft"] == "organization"
    assert types["Paris"] == "location"
    assert a.persons == ["John", "Sarah"]
    assert a.locations == ["Paris"] and a.organizations == ["Microsoft"]


def test_possessive_dropped_from_entity(pipeline: Language) -> None:
    a = analyze(pipeline, "What is Caroline's relationship status?", NOW)
    assert [e.name for e in a.entities] == ["Caroline"]


@pytest.mark.parametrize(("text", "start", "end"), [
    ("What did Melanie do last week?", "2023-05-01", "2023-05-08"),
    ("What happened yesterday?", "2023-05-07", "2023-05-08"),
    ("What did we talk about in May 2023?", "2023-05-01", "2023-06-01"),
    ("Which books did she read in 2022?", "2022-01-01", "2023-01-01"),
    ("What did Jon buy last month?", "2023-04-01", "2023-05-01"),
])
def test_temporal_range(pipeline: Language, text: str, start: str, end: str) -> None:
    rng = analyze(pipeline, text, NOW).to_wire().temporal_range
    assert rng is not None
    assert (rng.start, rng.end) == (start, end)


def test_relative_range_names_its_expression(pipeline: Language) -> None:
    rng = analyze(pipeline, "What did Melanie do last week?", NOW).to_wire().temporal_range
    assert rng is not None and rng.relative == "last week"
    absolute = analyze(pipeline, "What happened in May 2023?", NOW).to_wire().temporal_range
    assert absolute is not None and absolute.relative is None


def test_range_depends_on_now(pipeline: Language) -> None:
    later = datetime(2024, 2, 20)
    rng = analyze(pipeline, "What happened yesterday?", later).to_wire().temporal_range
    assert rng is not None and rng.start == "2024-02-19"


def test_operator_bounds_one_side(pipeline: Language) -> None:
    rng = analyze(pipeline, "What did Jon do before May 2023?", NOW).to_wire().temporal_range
    assert rng == TemporalRange(end="2023-05-01")
    rng = analyze(pipeline, "What has Jon done since 2021?", NOW).to_wire().temporal_range
    assert rng == TemporalRange(start="2021-01-01")


def test_unresolvable_event_gives_no_range(pipeline: Language) -> None:
    assert analyze(pipeline, "What did we discuss before the wedding?", NOW).temporal_range is None
    assert analyze(pipeline, "What did Caroline research?", NOW).temporal_range is None


@pytest.mark.parametrize(("text", "qtype"), [
    ("When did Caroline go to the LGBTQ support group?", "temporal"),
    ("What year did Jon start his company?", "temporal"),
    ("Would Melanie be more interested in a national park or a theme park?", "comparative"),
    ("What is the difference between pottery and painting?", "comparative"),
    ("How many children does Melanie have?", "aggregation"),
    ("What activities does Melanie partake in?", "aggregation"),
    ("Where does the friend of Jon who works at Microsoft live?", "multi-hop"),
    ("What is Jon's sister's husband's job?", "multi-hop"),
    ("Why did Caroline choose the adoption agency?", "conceptual"),
    ("What did Caroline research?", "factual"),
])
def test_question_type(pipeline: Language, text: str, qtype: str) -> None:
    assert analyze(pipeline, text, NOW).question_type == qtype


def test_complexity_grows_with_the_question(pipeline: Language) -> None:
    assert analyze(pipeline, "What did Caroline research?", NOW).complexity == "low"
    high = analyze(pipeline, "Where did Jon move from and what did he study in Paris with Sarah?",
                   NOW)
    assert high.complexity == "high"


def test_multi_hop_splits(pipeline: Language) -> None:
    a = analyze(pipeline, "Where did Jon move from and what did he study in Paris?", NOW)
    assert a.question_type == "multi-hop"
    assert a.sub_queries == ["Where did Jon move from", "what did he study in Paris?"]
    assert a.dependencies == []  # independent parts: run in parallel


def test_dependent_chain(pipeline: Language) -> None:
    a = analyze(pipeline, "Where does the friend of Jon who works at Microsoft live?", NOW)
    assert len(a.sub_queries) >= 2
    assert a.sub_queries[0] == "the friend of Jon who works at Microsoft"
    assert a.dependencies == [(0, 1)]  # the second needs the first's answer


def test_comparative_one_query_per_alternative(pipeline: Language) -> None:
    a = analyze(pipeline, "Would Melanie be more interested in going to a national park or a theme park?",
                NOW)
    assert len(a.sub_queries) == 2
    assert "national park" in a.sub_queries[0] and "theme park" in a.sub_queries[1]
    assert all("Melanie" in q for q in a.sub_queries)


def test_simple_question_is_its_own_sub_query(pipeline: Language) -> None:
    a = analyze(pipeline, "What did Caroline research?", NOW)
    assert a.sub_queries == ["What did Caroline research?"]
    assert a.required_info_types == ["fact"]
    assert 0 < a.confidence <= 1


def test_required_info(pipeline: Language) -> None:
    assert "date" in analyze(pipeline, "When did Jon move?", NOW).required_info_types
    assert "location" in analyze(pipeline, "Where did Jon move?", NOW).required_info_types
    assert "person" in analyze(pipeline, "Who did Jon marry?", NOW).required_info_types


def test_resolve_granularity() -> None:
    r = temporal.resolve("last weekend", NOW)
    assert r is not None and r.start == date(2023, 5, 6) and r.period == "weekend"
    r = temporal.resolve("a couple of days ago", NOW)
    assert r is not None and r.start == date(2023, 5, 6)
    assert temporal.resolve("the week before", NOW) is None


def test_parse_instant() -> None:
    assert temporal.parse_instant("2023-05-08T13:56:00Z") == NOW
    assert temporal.parse_instant("2023-05-08") == datetime(2023, 5, 8)
    with pytest.raises(temporal.DateError):
        temporal.parse_instant("yesterday-ish")
