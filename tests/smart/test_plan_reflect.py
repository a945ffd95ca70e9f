"""Planning, merging and reflection: pure functions over an analysis and hit lists."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from spacy.language import Language

from internal.api.responses import RankedHit
from internal.understanding import plan as P
from internal.understanding import reflect
from internal.understanding.analyze import analyze

NOW = datetime(2023, 5, 8, 13, 56)


def hit(i: str, text: str, sim: float | None = None, corpus: str = "c", *,
        title: str | None = None, score: float | None = None,
        metadata: dict[str, Any] | None = None) -> RankedHit:
    return RankedHit(id=i, corpus=corpus, distance=None, score=score, ranks={},
                     scores={"vector": sim, "lexical": None}, text=text, title=title, tags=[],
                     metadata=metadata or {}, language="english",
                     updated_at=datetime(2026, 1, 1, tzinfo=UTC))


def test_multi_hop_plan_runs_parts_in_parallel(pipeline: Language) -> None:
    a = analyze(pipeline, "Where did Jon move from and what did he study in Paris?", NOW)
    p = P.make_plan(a)
    parts = [q for q in p.sub_queries if q.purpose == "part"]
    assert len(parts) >= 2
    assert p.sub_queries[0].purpose == "original" and p.sub_queries[0].layer == "hybrid"
    assert p.execution == "parallel"
    assert len(P.waves(p.sub_queries, set())) == 1


def test_dependent_parts_run_in_sequence(pipeline: Language) -> None:
    a = analyze(pipeline, "Where does the friend of Jon who works at Microsoft live?", NOW)
    p = P.make_plan(a)
    assert p.execution == "sequential"
    first, second = [q for q in p.sub_queries if q.purpose == "part"][:2]
    assert second.depends_on == [first.id]
    waves = P.waves(p.sub_queries, set())
    assert len(waves) == 2 and second in waves[1] and first in waves[0]


def test_entities_become_a_lexical_must_match(pipeline: Language) -> None:
    a = analyze(pipeline, "What did Caroline research about adoption agencies?", NOW)
    p = P.make_plan(a)
    ent = [q for q in p.sub_queries if q.purpose == "entity"]
    assert len(ent) == 1
    assert ent[0].layer == "lexical" and ent[0].must_match == ["Caroline"]
    assert "adoption" in ent[0].text


def test_time_range_becomes_a_date_preference(pipeline: Language) -> None:
    a = analyze(pipeline, "What did Melanie paint last week?", NOW)
    p = P.make_plan(a, date_field="date")
    assert p.date_preference == {"field": "date", "after": "2023-05-01T00:00:00Z",
                                 "before": "2023-05-08T00:00:00Z"}
    assert p.sub_queries[0].prefer == {"date": p.date_preference}
    # The caller's own preference on the same key wins.
    mine = {"date": {"field": "when", "after": "2020-01-01T00:00:00Z"}}
    assert P.make_plan(a, user_prefer=mine).sub_queries[0].prefer == mine


def test_temporal_question_prefers_dated_hits(pipeline: Language,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "KEEP_TOP", 0)
    a = analyze(pipeline, "When did Caroline go to the support group?", NOW)
    p = P.make_plan(a)
    assert p.time_cue and p.sub_queries[0].prefer == {"has": ["dates"]}
    runs = [(p.sub_queries[0], [hit("a", "Caroline: the group was nice"),
                                hit("b", "Caroline: I went to the group yesterday")])]
    fused = P.fuse(runs, p)
    assert [h.id for h in fused] == ["b", "a"]  # "yesterday" states a time


def test_a_turn_said_by_the_person_asked_about_gets_the_speaker_bonus(
        pipeline: Language, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "KEEP_TOP", 0)
    a = analyze(pipeline, "What types of yoga has Maria practiced?", NOW)
    p = P.make_plan(a)
    assert p.persons == ["Maria"] and p.to_dict()["merge"]["speaker_bonus"] == P.SPEAKER_BONUS
    john, maria = hit("j", "John: Maria, my yoga class is fun"), hit("m", "Maria: kundalini yoga")
    john.metadata, maria.metadata = {"speaker": "John"}, {"speaker": "maria"}
    fused = P.fuse([(p.sub_queries[0], [john, maria])], p)
    assert [h.id for h in fused] == ["m", "j"]
    # Rank 2 of the question's ranking, names Maria (entity bonus), said by her.
    assert fused[0].merge_score == pytest.approx(
        1 / (P.RRF_K + 2) * (1 + P.ENTITY_BONUS) * (1 + P.SPEAKER_BONUS))
    # No person named: no bonus, the order stays.
    q = P.make_plan(analyze(pipeline, "What types of yoga are there?", NOW))
    assert q.persons == [] and [h.id for h in P.fuse([(q.sub_queries[0], [john, maria])], q)] == ["j", "m"]


def test_fuse_weights_and_must_match(pipeline: Language,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "KEEP_TOP", 0)
    a = analyze(pipeline, "What did Caroline research about adoption agencies?", NOW)
    p = P.make_plan(a)
    orig, ent = p.sub_queries[0], next(q for q in p.sub_queries if q.purpose == "entity")
    runs = [(orig, [hit("x", "Melanie: adoption agencies are slow"),
                    hit("y", "Caroline: I looked at adoption agencies")]),
            (ent, [hit("x", "Melanie: adoption agencies are slow"),
                   hit("y", "Caroline: I looked at adoption agencies")])]
    fused = P.fuse(runs, p)
    assert fused[0].id == "y"  # found by both sub-queries (x fails the must-match)
    assert fused[0].sub_queries == [orig.id, ent.id]
    assert fused[1].sub_queries == [orig.id]
    assert [h.rank for h in fused] == [1, 2]


def test_reflection_stops_when_adequate(pipeline: Language) -> None:
    a = analyze(pipeline, "What did Caroline research?", NOW)
    p = P.make_plan(a)
    results = {q.id: [hit("y", "Caroline: I researched adoption agencies", 0.7)]
               for q in p.sub_queries}
    fused = P.fuse([(q, results[q.id]) for q in p.sub_queries], p)
    found = reflect.assess(a, p, results, fused, bar=0.5, k=10)
    assert found.adequate and found.missing == []


def test_reflection_refines_only_the_missing_part(pipeline: Language) -> None:
    a = analyze(pipeline, "Where did Jon move from and what did he study in Paris?", NOW)
    p = P.make_plan(a)
    parts = [q for q in p.sub_queries if q.purpose == "part"]
    good = [hit("a", "Jon: I moved from Sweden to Paris", 0.8),
            hit("c", "Jon: Sweden was cold", 0.6)]
    weak = [hit("b", "Jon: Paris has great museums and architecture schools", 0.2)]
    results = {q.id: good for q in p.sub_queries}
    results[parts[1].id] = weak
    fused = P.fuse([(q, results[q.id]) for q in p.sub_queries], p)
    found = reflect.assess(a, p, results, fused, bar=0.5, k=10)
    assert not found.adequate
    assert [m.sub_query for m in found.missing if m.kind == "sub_query"] == [parts[1].id]
    new = reflect.refine(a, p, found, results, fused, set())
    assert len(new) == 1
    assert new[0].refines == parts[1].id
    assert new[0].text.startswith(parts[1].text)
    assert "museums" in new[0].text  # terms taken from the best hit
    assert new[0].id == len(p.sub_queries)


def test_reflection_names_an_unseen_entity(pipeline: Language) -> None:
    a = analyze(pipeline, "Did John and Sarah visit the museum?", NOW)
    p = P.make_plan(a)
    results = {q.id: [hit("a", "John: the museum was closed", 0.9)] for q in p.sub_queries}
    fused = P.fuse([(q, results[q.id]) for q in p.sub_queries], p)
    found = reflect.assess(a, p, results, fused, bar=0.5, k=10)
    assert [m.target for m in found.missing if m.kind == "entity"] == ["Sarah"]
    new = reflect.refine(a, p, found, results, fused, set())
    assert [q.must_match for q in new if q.refines == -1] == [["Sarah"]]


def test_refinement_never_repeats() -> None:
    assert reflect.feedback_terms([hit("a", "Caroline: adoption agencies and counseling")],
                                  {"caroline"}) == ["adoption", "agencies", "counseling"]


def test_refine_returns_nothing_twice(pipeline: Language) -> None:
    a = analyze(pipeline, "Where did Jon move from and what did he study in Paris?", NOW)
    p = P.make_plan(a)
    weak = [hit("b", "Jon: Paris has great museums", 0.1)]
    results = {q.id: weak for q in p.sub_queries}
    fused = P.fuse([(q, results[q.id]) for q in p.sub_queries], p)
    found = reflect.assess(a, p, results, fused, bar=0.5, k=10)
    tried: set[str] = set()
    assert reflect.refine(a, p, found, results, fused, tried)
    assert reflect.refine(a, p, found, results, fused, tried) == []  # so the loop ends


def test_spread_over_sources() -> None:
    hits = [hit(str(i), "", title="s1" if i < 5 else "s2") for i in range(7)]
    out = P.spread(hits, 3)
    assert [h.id for h in out] == ["0", "1", "2", "5", "6", "3", "4"]
    assert P.spread(hits, 10) == hits


def test_gathering_questions_spread(pipeline: Language, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "SPREAD_TYPES", ("aggregation",))
    assert P.make_plan(analyze(pipeline, "What activities does Melanie partake in?", NOW)).per_source
    assert not P.make_plan(analyze(pipeline, "What did Caroline research?", NOW)).per_source


def test_question_ranking_is_the_backbone(pipeline: Language) -> None:
    a = analyze(pipeline, "What did Caroline research about adoption agencies?", NOW)
    p = P.make_plan(a)
    orig, ent = p.sub_queries[0], next(q for q in p.sub_queries if q.purpose == "entity")
    own = [hit(str(i), f"Melanie: text {i}") for i in range(P.KEEP_TOP + 2)]
    extra = [hit("e", "Caroline: adoption agencies")]
    fused = P.fuse([(orig, own), (ent, extra)], p)
    ids = [h.id for h in fused]
    # The question's own first KEEP_TOP hits stay; the entity query's find is merged after.
    assert ids[:P.KEEP_TOP] == [h.id for h in own[:P.KEEP_TOP]]
    assert "e" in ids[P.KEEP_TOP:]


def test_prefer_speakers_reorders_one_ranking() -> None:
    hits = [hit("a", "", score=1.0, metadata={"speaker": "John"}),
            hit("b", "", score=0.9, metadata={"speaker": "Maria"}),
            hit("c", "", score=0.5)]
    assert [h.id for h in P.prefer_speakers(hits, ["maria"])] == ["b", "a", "c"]
    assert P.prefer_speakers(hits, []) == hits
    assert [h.id for h in P.prefer_speakers(hits, ["Nobody"])] == ["a", "b", "c"]


def test_fused_scores_read_in_the_order_of_the_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The original question's top hit is kept first even when another sub-query's hit
    fused higher; its score then shows the best score below it, never a lower one (what
    `lakehouse ask` and the console's ask print beside the rank)."""
    monkeypatch.setattr(P, "KEEP_TOP", 1)
    orig = P.SubQuery(0, "q", "hybrid", "original", 1.0)
    part = P.SubQuery(1, "part", "hybrid", "entity", 1.0)
    p = P.Plan([orig, part], "parallel", [], False, None)
    runs = [(orig, [hit("a", "a"), hit("b", "b")]),
            (part, [hit("b", "b"), hit("c", "c")])]
    fused = P.fuse(runs, p)
    assert [h.id for h in fused] == ["a", "b", "c"]  # a kept first though b fused higher
    scores = [h.merge_score for h in fused]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == scores[1] > scores[2]
