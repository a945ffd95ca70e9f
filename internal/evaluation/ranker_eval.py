"""`lakehouse eval --feedback-qrels`'s learned-ranker part: three rows per group of questions
(without feedback, the playbook's boost alone, the learned ranker), with the model trained
through matrixd's own route on the recorded pairs only.

- The boost alone is asked before any model of the playbook exists; then the model is
  trained (`POST /v1/matrix/ranker/train`, `wait`) and the same questions asked again.
- The boost's weight in the model is fixed at 1 (`[matrixd] ranker_alpha`, chosen on the
  prototype's held-out figures); a second column trains with it chosen among 0, 1, 3, 10
  by the cross-validation on the records alone (`ranker_choose_alpha`), the honest check.
- Cross-validation over the questions (`folds`): fold f's questions asked with a playbook
  of the other folds' pairs and a model trained on those; every question held out once.
- The learning curve: the held-out questions with the first n pairs (sha256 order).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from internal.api.ranker import RankerModel, TrainRanker
from internal.clients.matrixd import MatrixdClient
from internal.evaluation.metrics import evaluate

TRAIN_TIMEOUT = 1800.0


def fold(qid: str, folds: int) -> int:
    """The question's fold: sha256 of its id, as `feedback.held_out` buckets it (fold 0 of
    5 is exactly its held-out 20%)."""
    bucket = int.from_bytes(hashlib.sha256(qid.encode("utf-8")).digest()[:8], "big") % 10_000
    return bucket * folds // 10_000


def first_pairs(pairs: Sequence[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """The first n pairs in sha256 order of 'query<TAB>doc': a stable sample."""
    key = {p: hashlib.sha256(f"{p[0]}\t{p[1]}".encode()).hexdigest() for p in pairs}
    return sorted(pairs, key=key.__getitem__)[:n]


@dataclass(frozen=True)
class Trained:
    """What one training answered."""

    id: int
    trees: int
    alpha: float
    queries: int
    examples: int
    seconds: float
    cv_boost: float | None
    cv_ranker: float | None
    reason: str | None

    @classmethod
    def of(cls, m: RankerModel) -> Trained:
        return cls(m.id, m.trees, m.alpha, m.queries, m.examples, m.seconds, m.ndcg10_boost,
                   m.ndcg10_ranker, m.reason)

    def describe(self) -> str:
        what = f"{self.trees} trees, alpha {self.alpha:g}" if self.trees else "the boost alone"
        cv = (f"; CV on the records {self.cv_boost:.4f} -> {self.cv_ranker:.4f}"
              if self.cv_boost is not None and self.cv_ranker is not None else "")
        return (f"model {self.id}: {what} ({self.queries} questions, {self.examples} rows, "
                f"{self.seconds:.1f} s{cv})")


async def train(matrix: MatrixdClient, playbook: str) -> Trained:
    return Trained.of(await matrix.train_ranker(TrainRanker(playbook_corpus=playbook),
                                                timeout=TRAIN_TIMEOUT))


@dataclass(frozen=True)
class Row:
    """nDCG@10 of one group of questions: without feedback, the boost alone, the ranker
    (alpha 1) and the ranker with alpha chosen on the records."""

    group: str
    queries: int
    without: float
    boost: float
    ranker: float
    ranker_cv: float | None


Runs = Mapping[str, Sequence[str]]


def ndcg(run: Runs, qrels: Mapping[str, Mapping[str, int]], qids: set[str]) -> float:
    sub = {q: qrels[q] for q in qids if q in qrels}
    return evaluate({q: run.get(q, []) for q in sub}, sub)["ndcg@10"] if sub else math.nan


def rows(groups: Sequence[tuple[str, set[str]]], qrels: Mapping[str, Mapping[str, int]],
         without: Runs, boost: Runs, ranker: Runs, ranker_cv: Runs | None) -> list[Row]:
    out = []
    for name, qids in groups:
        judged = {q for q in qids if q in qrels}
        if not judged:
            continue
        out.append(Row(name, len(judged), ndcg(without, qrels, judged), ndcg(boost, qrels, judged),
                       ndcg(ranker, qrels, judged),
                       None if ranker_cv is None else ndcg(ranker_cv, qrels, judged)))
    return out


@dataclass(frozen=True)
class CurvePoint:
    records: int
    questions: int
    boost: float
    ranker: float
    trained: Trained


@dataclass
class RankerReport:
    rows: list[Row] = field(default_factory=list)
    models: list[Trained] = field(default_factory=list)  # alpha fixed: one, or one per fold
    models_cv: list[Trained] = field(default_factory=list)  # alpha chosen on the records
    folds: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    ms_ranker: float = 0.0  # mean latency of a search with the ranker, seen by the client
    seconds: float = 0.0

    def table(self) -> str:
        how = (f"{self.folds}-fold cross-validation over the questions (each held out once, "
               "with a playbook and a model of the other folds' pairs)" if self.folds > 1
               else "one model on the recorded pairs")
        lines = [f"learned ranker (hybrid), {how}:", ""]
        lines += [f"- {m.describe()}" for m in self.models]
        lines += [f"- alpha by CV: {m.describe()}" for m in self.models_cv]
        lines += ["", "| questions | n | without feedback | boost alone | learned ranker | "
                  "learned ranker, alpha by CV |", "|---|---:|---:|---:|---:|---:|"]
        for r in self.rows:
            cv = "n/a" if r.ranker_cv is None else f"{r.ranker_cv:.4f}"
            lines.append(f"| {r.group} | {r.queries} | {r.without:.4f} | {r.boost:.4f} | "
                         f"{r.ranker:.4f} | {cv} |")
        if self.curve:
            lines += ["", "learning curve (the held-out questions; the first n pairs recorded):",
                      "", "| records | questions | boost alone | learned ranker (as used) | "
                      "trees | CV on the records: boost / ranker |",
                      "|---:|---:|---:|---:|---:|---|"]
            for p in self.curve:
                t = p.trained
                cv = (f"{t.cv_boost:.4f} / {t.cv_ranker:.4f}"
                      if t.cv_boost is not None and t.cv_ranker is not None else "n/a")
                lines.append(f"| {p.records} | {p.questions} | {p.boost:.4f} | {p.ranker:.4f} | "
                             f"{t.trees} | {cv} |")
        lines += ["", f"searches with the ranker: {self.ms_ranker:.1f} ms/query; "
                      f"the ranker's part of the run {self.seconds:.0f} s"]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        def model(t: Trained) -> dict[str, Any]:
            return {"id": t.id, "trees": t.trees, "alpha": t.alpha, "queries": t.queries,
                    "examples": t.examples, "seconds": t.seconds, "cv_boost": t.cv_boost,
                    "cv_ranker": t.cv_ranker, "reason": t.reason}

        return {
            "folds": self.folds, "models": [model(m) for m in self.models],
            "models_alpha_by_cv": [model(m) for m in self.models_cv],
            "rows": [{"group": r.group, "queries": r.queries,
                      "ndcg@10_without": round(r.without, 4), "ndcg@10_boost": round(r.boost, 4),
                      "ndcg@10_ranker": round(r.ranker, 4),
                      "ndcg@10_ranker_alpha_by_cv": None if r.ranker_cv is None
                      else round(r.ranker_cv, 4)} for r in self.rows],
            "curve": [{"records": p.records, "questions": p.questions,
                       "ndcg@10_boost": round(p.boost, 4), "ndcg@10_ranker": round(p.ranker, 4),
                       "model": model(p.trained)} for p in self.curve],
            "ms_ranker": round(self.ms_ranker, 2), "seconds": round(self.seconds, 1),
        }


class Clock:
    """Seconds and searches of the ranker's part, for the report's last line."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.search_seconds = 0.0
        self.searches = 0

    def add(self, seconds: float, searches: int) -> None:
        self.search_seconds += seconds
        self.searches += searches

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def close(self, report: RankerReport) -> RankerReport:
        report.seconds = self.elapsed
        report.ms_ranker = 1000 * self.search_seconds / self.searches if self.searches else 0.0
        return report
