"""Cross-validated choice of the default search (internal.evaluation.crossval)."""

from __future__ import annotations

import pytest

from internal.evaluation import crossval


def _keys(n: int, sets: tuple[str, ...] = ("a", "b")) -> list[crossval.QueryKey]:
    return [(s, str(i)) for s in sets for i in range(n)]


def test_folds_are_stable_and_cover_every_query() -> None:
    keys = _keys(200)
    folds = [crossval.fold_of(k, 5) for k in keys]
    assert folds == [crossval.fold_of(k, 5) for k in keys]
    assert set(folds) == set(range(5))
    # Roughly even: no fold holds under half its share.
    assert min(folds.count(i) for i in range(5)) > 40


def test_each_set_counts_once() -> None:
    scores = {("big", str(i)): 1.0 for i in range(90)} | {("small", "0"): 0.0}
    assert crossval.score(scores, list(scores)) == pytest.approx(0.5)


def test_a_config_that_wins_everywhere_is_chosen_in_every_fold() -> None:
    keys = _keys(100)
    configs = {"worse": dict.fromkeys(keys, 0.4), "better": dict.fromkeys(keys, 0.6)}
    result = crossval.cross_validate(configs, folds=5)
    assert [f.chosen for f in result.folds] == ["better"] * 5
    assert result.mean_held_out == pytest.approx(0.6)
    assert result.chosen_on_all == "better"
    text = crossval.table(result, default="worse")
    assert "| worse (default) | 0.4000 | 0.4000 |" in text
    assert "mean of held-out folds): 0.6000" in text


def test_held_out_scores_the_choice_on_queries_it_never_saw() -> None:
    # "lucky" is perfect on fold 0 only; chosen on all queries it looks best, but in the
    # fold where fold 0 is held out the choice is made without it.
    keys = _keys(300)
    lucky = {k: (1.0 if crossval.fold_of(k, 5) == 0 else 0.45) for k in keys}
    steady = dict.fromkeys(keys, 0.5)
    result = crossval.cross_validate({"steady": steady, "lucky": lucky}, folds=5)
    assert result.chosen_on_all == "lucky"
    fold0 = result.folds[0]
    assert fold0.chosen == "steady" and fold0.held_out == pytest.approx(0.5)
    assert result.mean_held_out < result.on_all["lucky"]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="folds"):
        crossval.cross_validate({"a": {("s", "1"): 1.0}}, folds=1)
    with pytest.raises(ValueError, match="other queries"):
        crossval.cross_validate({"a": {("s", "1"): 1.0}, "b": {("s", "2"): 1.0}}, folds=2)
    with pytest.raises(ValueError, match="no queries"):
        crossval.cross_validate({"a": {("s", "1"): 1.0}}, folds=5)


def test_candidates_cover_fusion_and_feedback() -> None:
    assert crossval.CANDIDATES[crossval.AS_SHIPPED] == {}
    assert len(crossval.CANDIDATES) == (1 + len(crossval.FUSIONS) * len(crossval.FEEDBACK)
                                        + len(crossval.POOLS))
    assert crossval.CANDIDATES["weighted, feedback off"] == {"fusion": "weighted",
                                                             "prf": {"docs": 0}}


def test_the_json_carries_each_query_of_the_configuration() -> None:
    """`lakehouse eval --cross-validate --json`: what a paired comparison of two runs reads."""
    keys = _keys(10)
    configs = {"a": {k: 0.1 * int(k[1]) for k in keys}, "b": dict.fromkeys(keys, 0.5)}
    doc = crossval.to_json(crossval.cross_validate(configs, folds=2), "a")
    assert doc["configuration"] == "a" and set(doc["held_out_by_set"]) == {"a", "b"}
    assert doc["per_query"]["b"]["3"] == pytest.approx(0.3)
    assert sorted(doc["per_query"]) == ["a", "b"] and len(doc["per_query"]["a"]) == 10
