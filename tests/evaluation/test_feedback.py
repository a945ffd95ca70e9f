"""`lakehouse eval --feedback-qrels` on Cranfield through real matrixd, vectord and embedd."""

from __future__ import annotations

from collections import Counter

from internal.config import Config
from internal.evaluation import beir
from internal.evaluation.feedback import evaluate_feedback, feedback_pairs, held_out
from tests.helpers import ROOT, require_shared

VECTOR_CACHE = ROOT / "var" / "eval-cache"


def test_split_is_stable_and_about_the_share() -> None:
    qids = [str(i) for i in range(10_000)]
    out = [q for q in qids if held_out(q)]
    assert 1850 < len(out) < 2150
    assert out == [q for q in qids if held_out(q)]  # a hash, not a random draw
    assert not any(held_out(q, 0.0) for q in qids)
    qrels = {"1": {"a": 1, "b": 0}, "2": {"c": 2}}
    pairs = feedback_pairs(qrels, 0.0)
    assert pairs == [("1", "a"), ("2", "c")]  # grade 0 is not a judged answer


async def test_feedback_eval_on_cranfield(base_cfg: Config) -> None:
    folder = require_shared("data", "cranfield")
    report = await evaluate_feedback(base_cfg, folder, "dev", folder / "qrels" / "dev.tsv",
                                     ["hybrid-weighted"], in_process=True, corpus="eval_cranfield",
                                     cache_dir=VECTOR_CACHE)
    assert report.ok, [m.error for m in report.modes]
    qrels = beir.load_qrels(folder / "qrels" / "dev.tsv")
    assert report.recorded + report.record_skipped == len(feedback_pairs(qrels))
    (mode,) = report.modes
    rows = {r.group: r for r in mode.rows}
    assert Counter(r.group for r in mode.rows) == Counter(
        ["held out", "asked again", "no matching entry", "all"])
    assert rows["held out"].queries + rows["asked again"].queries == rows["all"].queries == 113
    # Asked again, the recorded answers come up: a large lift, nearly every query boosted.
    assert rows["asked again"].lift > 0.1
    assert rows["asked again"].boosted_share > 0.9
    # Where no entry matched, nothing changes.
    assert rows["no matching entry"].without == rows["no matching entry"].with_
    assert "held out" in report.table() and "asked again" in report.table()
