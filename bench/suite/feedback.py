"""The learning curve of feedback: nDCG@10 of SciFact's held-out questions as more judged
answers are recorded, the boost alone and the learned ranker.

`lakehouse eval --feedback-qrels`'s run, in-process (vectord and embedd in this process,
the eval's corpus and cache): SciFact train's judged pairs outside the held-out 20%
recorded in a fresh playbook, the held-out questions asked without feedback, with the
boost alone and with the learned ranker; then, for each n of --curve, a playbook of the
first n pairs only (sha256 order) and its ranker, the held-out questions asked again.
"""

from __future__ import annotations

from bench.harness import Run
from internal.common import logs
from internal.config import load_or_exit
from internal.evaluation.feedback import evaluate_feedback

OPTIONS = {"curve": ("10,50,200,500", "records of each point"), "split": "train"}
QUICK = {"curve": "10,100"}


async def main(run: Run) -> None:
    cfg = load_or_exit(None)
    logs.configure("warning", cfg.log.format)
    folder = run.need("data", "scifact")
    report = await evaluate_feedback(
        cfg, folder, run.args.split, folder / "qrels" / f"{run.args.split}.tsv", ["hybrid"],
        in_process=True, cache_dir=run.root / "var" / "eval-cache",
        curve=[int(n) for n in run.args.curve.split(",")])
    ranker = report.ranker
    assert ranker is not None, "the ranker's rows need the hybrid mode"
    run.table(f"SciFact {run.args.split}: {report.recorded} judged pairs recorded; nDCG@10",
              ["questions", "n:d", "without feedback:.4f", "boost alone:.4f", "learned ranker:.4f"],
              [(r.group, r.queries, r.without, r.boost, r.ranker) for r in ranker.rows])
    run.table("learning curve (the held-out questions; the first n pairs recorded)",
              ["records:d", "questions:d", "boost alone:.4f", "learned ranker:.4f", "trees:d"],
              [(p.records, p.questions, p.boost, p.ranker, p.trained.trees) for p in ranker.curve])
    held = next(r for r in ranker.rows if r.group == "held out")
    run.series("learning curve: without feedback", [[p.records, held.without] for p in ranker.curve])
    run.series("learning curve: boost alone", [[p.records, p.boost] for p in ranker.curve])
    run.series("learning curve: learned ranker", [[p.records, p.ranker] for p in ranker.curve])
