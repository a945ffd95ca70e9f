"""The feedback evaluation's split of judged answers (its run on Cranfield is in
test_eval_cranfield.py: one file, so one worker, embeds Cranfield for both)."""

from __future__ import annotations

from internal.evaluation.feedback import feedback_pairs, held_out


def test_split_is_stable_and_about_the_share() -> None:
    qids = [str(i) for i in range(10_000)]
    out = [q for q in qids if held_out(q)]
    assert 1850 < len(out) < 2150
    assert out == [q for q in qids if held_out(q)]  # a hash, not a random draw
    assert not any(held_out(q, 0.0) for q in qids)
    qrels = {"1": {"a": 1, "b": 0}, "2": {"c": 2}}
    pairs = feedback_pairs(qrels, 0.0)
    assert pairs == [("1", "a"), ("2", "c")]  # grade 0 is not a judged answer
