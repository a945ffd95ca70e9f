"""Features for the learned ranker (internal.matrixd.ranker_features): no server needed."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from internal.api.vectord import Hit
from internal.matrixd import ranker_features as rf
from internal.matrixd.boost import Match, PlaybookEntry

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def hit(id_: str, score: float, vector: float | None, lexical: float | None,
        *, title: str | None = None, text: str = "", included: bool = False) -> Hit:
    ranks: dict[str, int | None] = {"vector": None if vector is None else 1,
                                    "lexical": None if lexical is None else 1}
    return Hit(id=id_, corpus="c", distance=None if vector is None else 1 - vector, score=score,
               ranks=ranks, scores={"vector": vector, "lexical": lexical}, text=text,
               title=title, tags=[], metadata={}, language="english",
               updated_at=NOW - timedelta(days=2), included=included)


def match(question: str, answer: str, score: float, distance: float) -> Match:
    return Match(PlaybookEntry(query_text=question, answer_id=answer, answer_corpus="c",
                               score=score), distance)


def col(row: list[float], name: str) -> float:
    return row[rf.FEATURES.index(name)]


def test_out_of_fold_drops_the_questions_own_records() -> None:
    own = "does aspirin lower the risk of stroke"
    others = [f"question number {i}" for i in range(40)]
    matches = [match(own, "a1", 1.0, 0.0), match(own, "a2", 1.0, 0.0)]
    matches += [match(q, f"b{i}", 1.0, 0.2) for i, q in enumerate(others)]
    kept = rf.out_of_fold(matches, own)
    assert all(m.entry.query_text != own for m in kept)
    # Records of the other folds stay: the fold is the recorded question's, not the answer's.
    assert {m.entry.query_text for m in kept} == {
        q for q in others if rf.fold_of(q) != rf.fold_of(own)}
    assert kept, "forty other questions cannot all share one fold of five"


def test_fold_is_the_questions_and_stable() -> None:
    assert rf.fold_of("same words") == rf.fold_of("same words")
    assert {rf.fold_of(f"q{i}") for i in range(100)} == set(range(rf.FOLDS))


def test_signals_count_right_and_wrong_apart() -> None:
    sig = rf.signals([match("q1", "x", 1.0, 0.1), match("q2", "x", 0.5, 0.3),
                      match("q3", "x", -1.0, 0.2), match("q4", "y", -0.5, 0.25)])
    x, y = sig[("c", "x")], sig[("c", "y")]
    assert (x.pos_n, x.neg_n) == (2, 1)
    assert math.isclose(x.pos_sim, 0.9) and math.isclose(x.pos_sum, 0.9 + 0.7)
    assert math.isclose(x.neg_sim, 0.8)
    assert x.best == 1.0  # both signs: the nearest question decides (boost.best_scores)
    assert (y.pos_n, y.neg_n, y.best) == (0, 1, -0.5)


def test_rows_carry_each_layer_and_nan_for_a_missing_one() -> None:
    q = rf.Question.of("aspirin stroke", {"aspirin": 2, "stroke": 50}, 100)
    hits = [hit("a", 0.9, 0.8, 12.0, title="Aspirin trial", text="aspirin and stroke"),
            hit("b", 0.45, None, 6.0, text="stroke"),
            hit("r", 0.1, 0.5, None, included=True)]
    bm25 = {("c", "a"): rf.Bm25(10.0, 1), ("c", "b"): rf.Bm25(5.0, 2)}
    rows = rf.rows(q, hits, [match("aspirin and stroke?", "r", 1.0, 0.1)], bm25, NOW)
    assert [len(r) for r in rows] == [len(rf.FEATURES)] * 3
    a, b, r = rows
    assert col(a, "fused_rel") == 1.0 and col(b, "fused_rel") == 0.5
    assert col(b, "fused_rank") == 2.0
    assert math.isnan(col(b, "vector_sim")) and math.isnan(col(b, "vector_rank"))
    assert math.isclose(col(r, "vector_gap"), 0.5 - 0.8)
    assert col(b, "bm25_rel") == 0.5 and math.isnan(col(r, "bm25"))
    assert (col(a, "retrieved"), col(r, "retrieved")) == (1.0, 0.0)
    assert math.isclose(col(r, "pb_pos_sim"), 0.9) and col(a, "pb_pos_sim") == 0.0
    assert col(a, "pb_entries") == 1.0 and math.isclose(col(a, "pb_nearest_sim"), 0.9)
    # The rarer word weighs more: the title holds "aspirin" only.
    idf_a, idf_s = q.idf["aspirin"], q.idf["stroke"]
    assert math.isclose(col(a, "title_match"), idf_a / (idf_a + idf_s))
    assert col(a, "text_match") == 1.0 and col(b, "text_match") < 0.5
    assert math.isclose(col(a, "age_days"), 2.0)
    assert col(a, "q_words") == 2.0 and math.isclose(col(a, "q_idf_max"), idf_a)


def test_playbook_columns_are_the_rows_playbook_part() -> None:
    q = rf.Question.of("x", {}, 10)
    hits = [hit("a", 1.0, 0.9, 1.0), hit("b", 0.5, 0.8, None)]
    ms = [match("x?", "b", 1.0, 0.05), match("y?", "a", -1.0, 0.3)]
    rows = rf.rows(q, hits, ms, {}, NOW)
    pb = [[r[rf.FEATURES.index(n)] for n in rf.PLAYBOOK_FEATURES] for r in rows]
    got = rf.playbook_columns(hits, ms)
    assert [[x if not math.isnan(x) else None for x in r] for r in pb] == [
        [x if not math.isnan(x) else None for x in r] for r in got]
