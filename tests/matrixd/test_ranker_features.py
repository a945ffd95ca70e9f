"""The learned ranker's pure parts (internal.matrixd.ranker.features, .model, .serve's plan):
the rows, the folds a training question's own records are kept out of, the choice of trees
and the fallback. No server needed."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from internal.api.ranker import HitFeatures, QueryStats, StoredRanker
from internal.api.vectord import Hit
from internal.common.access import Scope
from internal.matrixd.boost import Match, PlaybookEntry
from internal.matrixd.deps import RankerCache
from internal.matrixd.ranker import collect, model
from internal.matrixd.ranker import features as rf
from internal.matrixd.ranker.serve import plan
from lakehouse.wire.modes import MODES

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def hit(id_: str, score: float, vector: float | None, lexical: float | None,
        *, included: bool = False) -> Hit:
    ranks: dict[str, int | None] = {"vector": None if vector is None else 1,
                                    "lexical": None if lexical is None else 1}
    return Hit(id=id_, corpus="c", distance=None if vector is None else 1 - vector, score=score,
               ranks=ranks, scores={"vector": vector, "lexical": lexical}, text="", title=None,
               tags=[], metadata={}, language="english", updated_at=NOW, included=included)


def match(question: str, answer: str, score: float, distance: float) -> Match:
    return Match(PlaybookEntry(query_text=question, answer_id=answer, answer_corpus="c",
                               score=score), distance)


def col(rows: np.ndarray, i: int, name: str) -> float:
    return float(rows[i, rf.FEATURES.index(name)])


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


def test_a_training_questions_features_never_hold_its_own_record() -> None:
    """What training collects (collect.matches_out_of_fold, then the rows' playbook part):
    a question and its paraphrase of the same fold answer a1, a question of another fold
    answers a2; all three near each other. The question sees a2's record, never a1's."""
    own = "does aspirin lower the risk of stroke"
    same = next(f"aspirin and stroke risk, take {i}" for i in range(100)
                if rf.fold_of(f"aspirin and stroke risk, take {i}") == rf.fold_of(own))
    other = next(f"aspirin against strokes, take {i}" for i in range(100)
                 if rf.fold_of(f"aspirin against strokes, take {i}") != rf.fold_of(own))
    entries = [PlaybookEntry(query_text=q, answer_id=a, answer_corpus="c", score=1.0)
               for q, a in ((own, "a1"), (same, "a1"), (other, "a2"))]
    near = {own: [1.0, 0.0], same: [0.99, 0.141], other: [0.98, 0.199]}
    vectors = {q: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for q, v in near.items()}
    recs = collect.Records("pb", ["c"], entries, len(entries))
    found = collect.matches_out_of_fold(recs, vectors, top_k=20, max_distance=0.35)
    assert [m.entry.query_text for m in found[own]] == [other]
    assert {m.entry.query_text for m in found[other]} == {own, same}
    rows = rf.rows([hit("a1", 0.9, 0.8, 5.0), hit("a2", 0.8, 0.7, 4.0)], [None, None],
                   found[own], None)
    assert col(rows, 0, "pb_pos_n") == 0 and col(rows, 0, "pb_pos_sim") == 0
    assert col(rows, 1, "pb_pos_n") == 1 and col(rows, 1, "pb_pos_sim") > 0.9


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


def test_rows_carry_each_layer_the_items_and_nan_for_a_missing_one() -> None:
    hits = [hit("a", 0.9, 0.8, 12.0), hit("b", 0.45, None, 6.0), hit("r", 0.1, 0.5, None,
                                                                     included=True)]
    extras = [HitFeatures(title_words=2, text_words=30, title_match=0.4, text_match=1.0,
                          bm25=10.0, bm25_rank=1),
              HitFeatures(title_words=0, text_words=8, title_match=0.0, text_match=0.3,
                          bm25=5.0, bm25_rank=2), None]
    query = QueryStats(lexemes=2, idf_mean=2.0, idf_max=3.5)
    rows = rf.rows(hits, extras, [match("aspirin and stroke?", "r", 1.0, 0.1)], query)
    assert rows.shape == (3, len(rf.FEATURES))
    assert col(rows, 0, "fused_rel") == 1.0 and col(rows, 1, "fused_rel") == 0.5
    assert col(rows, 1, "fused_rank") == 2.0
    assert math.isnan(col(rows, 1, "vector_sim")) and math.isnan(col(rows, 1, "vector_rank"))
    assert math.isclose(col(rows, 2, "vector_gap"), 0.5 - 0.8)
    assert col(rows, 1, "bm25_rel") == 0.5 and math.isnan(col(rows, 2, "bm25"))
    assert (col(rows, 0, "retrieved"), col(rows, 2, "retrieved")) == (1.0, 0.0)
    assert math.isclose(col(rows, 2, "pb_pos_sim"), 0.9) and col(rows, 0, "pb_pos_sim") == 0.0
    assert col(rows, 0, "pb_entries") == 1.0 and math.isclose(col(rows, 0, "pb_nearest_sim"), 0.9)
    assert (col(rows, 0, "doc_words"), col(rows, 0, "title_words")) == (30.0, 2.0)
    assert (col(rows, 0, "title_match"), col(rows, 1, "text_match")) == (0.4, 0.3)
    assert math.isnan(col(rows, 2, "text_match"))  # no values from vectord for it
    assert [col(rows, 2, n) for n in rf.QUERY_FEATURES] == [2.0, 2.0, 3.5]


def test_playbook_columns_are_the_rows_playbook_part() -> None:
    hits = [hit("a", 1.0, 0.9, 1.0), hit("b", 0.5, 0.8, None)]
    ms = [match("x?", "b", 1.0, 0.05), match("y?", "a", -1.0, 0.3)]
    rows = rf.rows(hits, [None, None], ms, None)
    at = rf.FEATURES.index(rf.PLAYBOOK_FEATURES[0])
    got = np.asarray(rf.playbook_columns(hits, ms))
    assert np.array_equal(rows[:, at:at + len(rf.PLAYBOOK_FEATURES)], got, equal_nan=True)


def groups(n: int, signal: bool, seed: int = 3) -> list[model.Group]:
    """n questions of 30 candidates; with signal, the right one is the candidate whose
    first feature is largest, which the fused score (the base) does not know."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n):
        x = rng.normal(size=(30, len(rf.FEATURES)))
        base = rng.uniform(size=30)
        y = np.zeros(30)
        y[int(np.argmax(x[:, 0])) if signal else int(rng.integers(30))] = 1.0
        out.append(model.Group(q % rf.FOLDS, x, y, base))
    return out


def test_trees_are_used_when_they_beat_the_boost_on_the_records() -> None:
    fit = model.fit(groups(60, signal=True), rf.FEATURES)
    assert fit.trees > 0 and fit.model is not None and fit.reason is None
    assert fit.ndcg10_ranker is not None and fit.ndcg10_boost is not None
    assert fit.ndcg10_ranker > fit.ndcg10_boost + 0.3
    assert set(fit.cv) == {f"1/{t}" for t in model.TREES}


def test_trees_that_do_not_beat_the_boost_fall_back_and_say_why() -> None:
    fit = model.fit(groups(60, signal=False), rf.FEATURES)
    assert fit.trees == 0 and fit.model is None
    assert fit.reason is not None and ("do not beat" in fit.reason
                                       or "no number of trees" in fit.reason)


def test_too_few_questions_fall_back_without_training() -> None:
    fit = model.fit(groups(8, signal=True), rf.FEATURES, min_queries=20)
    assert (fit.trees, fit.model, fit.cv) == (0, None, {})
    assert fit.reason == ("too few records: 8 recorded questions with a right answer among "
                          "their candidates (at least 20)")


def test_the_rule_wants_more_than_noise() -> None:
    base = [0.5] * 20
    better = [0.5 + (0.01 if i % 2 else -0.005) for i in range(20)]  # +0.0025, noisy
    per = {(1.0, 0): base, (1.0, 10): better}
    assert model.choose(per, 1.0)[0] == (1.0, 0)
    clearly = [0.6] * 19 + [0.55]
    assert model.choose({(1.0, 0): base, (1.0, 10): clearly}, 1.0) == ((1.0, 10), None)


def stored(id_: int, corpora: list[str], trees: int = 10) -> StoredRanker:
    return StoredRanker(id=id_, created_at=NOW, playbook_corpus="pb", corpora=corpora,
                        trained_by="admin", records=1, playbook_count=1, queries=1, examples=1,
                        seconds=0.1, trees=trees, alpha=1.0, model="x" if trees else None,
                        reason=None if trees else "too few records")


@pytest.mark.parametrize(("scope", "expected"), [
    (None, [2, 1]),
    (Scope(key_id="k", actions=("search",), corpora=("a", "b")), [2, 1]),
    (Scope(key_id="k", actions=("search",), corpora=("a",)), [1]),
    (Scope(key_id="k", actions=("search",), corpora=("b",)), None),
])
def test_a_model_of_corpora_a_key_cannot_see_never_ranks_its_searches(
        scope: Scope | None, expected: list[int] | None) -> None:
    cache = RankerCache(current=[stored(1, ["a"]), stored(2, ["a", "b"])],
                        boosters={1: object(), 2: object()})
    p = plan(cache, "pb", scope, MODES["hybrid"], None)
    assert (None if p is None else [m.id for m in p.models]) == expected


def test_the_plan_says_why_the_boost_alone_orders_a_search() -> None:
    cache = RankerCache(current=[stored(1, ["a"], trees=0)])
    p = plan(cache, "pb", None, MODES["hybrid"], None)
    assert p is not None and not p.applies and p.reason == "too few records"
    cache = RankerCache(current=[stored(1, ["a"])], boosters={1: object()})
    for mode, fusion, why in (("vector", None, "mode vector"), ("hybrid", "rrf", "fusion rrf")):
        p = plan(cache, "pb", None, MODES[mode], fusion)
        assert p is not None and not p.applies and p.reason is not None
        assert p.reason.startswith(why)
    assert plan(cache, "other", None, MODES["hybrid"], None) is None
