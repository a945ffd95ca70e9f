"""The runs of `lakehouse eval --feedback-qrels`'s learned-ranker part (the rows and their
meaning: internal.evaluation.ranker_eval): on the one split, by cross-validation over the
questions, and the learning curve. Each playbook is made afresh, so no model of an
earlier run applies; the boost alone is asked before a model of the playbook exists."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.common.errors import ServiceError
from internal.evaluation import ranker_eval
from internal.evaluation.asking import Side, ask_both, ask_with, record_all
from internal.evaluation.ranker_eval import Clock, CurvePoint, RankerReport
from internal.evaluation.runner import SearchOptions

MODE = "hybrid"  # the mode the model ranks (the default search's)


@dataclass
class Ask:
    """What every run of the part shares: the daemons, the corpus, the questions."""

    vectord: VectordClient
    matrix: MatrixdClient  # alpha fixed
    matrix_cv: MatrixdClient | None  # alpha chosen on the records
    corpus: str
    queries: Mapping[str, str]  # every question (text of the ids recorded and asked)
    vectors: Mapping[str, list[float]]
    options: SearchOptions

    async def fresh(self, playbook: str, pairs: Sequence[tuple[str, str]]) -> tuple[int, int]:
        """A new playbook holding these pairs: (recorded, skipped)."""
        with contextlib.suppress(ServiceError):
            await self.vectord.delete_corpus(playbook)
        return await record_all(self.matrix, self.corpus, playbook, pairs, self.queries)

    def some(self, qids: set[str]) -> tuple[dict[str, str], dict[str, list[float]]]:
        return ({q: self.queries[q] for q in qids if q in self.vectors},
                {q: self.vectors[q] for q in qids if q in self.vectors})

    async def ranked(self, playbook: str, qids: set[str], clock: Clock,
                     cv: bool = False) -> tuple[ranker_eval.Trained, Side]:
        """Train on the playbook, then ask the questions with it."""
        matrix = self.matrix_cv if cv and self.matrix_cv is not None else self.matrix
        trained = await ranker_eval.train(matrix, playbook)
        queries, vectors = self.some(qids)
        side = await ask_with(matrix, self.corpus, playbook, MODE, queries, vectors,
                              self.options)
        clock.add(side.seconds, len(queries))
        return trained, side


async def on_the_split(a: Ask, playbook: str, without: Side, boost: Side,
                       groups: Sequence[tuple[str, set[str]]],
                       qrels: Mapping[str, Mapping[str, int]]) -> RankerReport:
    """The playbook as recorded for the split; the boost's runs already asked."""
    clock = Clock()
    every = set().union(*(q for _, q in groups))
    trained, ranked = await a.ranked(playbook, every, clock)
    out = RankerReport(models=[trained])
    ranked_cv: Side | None = None
    if a.matrix_cv is not None:
        trained_cv, ranked_cv = await a.ranked(playbook, every, clock, cv=True)
        out.models_cv.append(trained_cv)
    out.rows = ranker_eval.rows(groups, qrels, without.run, boost.run, ranked.run,
                                None if ranked_cv is None else ranked_cv.run)
    return clock.close(out)


async def curve(a: Ask, report: RankerReport, name: str, pairs: Sequence[tuple[str, str]],
                held: set[str], qrels: Mapping[str, Mapping[str, int]],
                sizes: Sequence[int]) -> None:
    """The held-out questions with the first n pairs recorded, for each n (then all)."""
    clock = Clock()
    for n in sizes:
        chosen = ranker_eval.first_pairs(pairs, n)
        playbook = f"{name[:40]}_curve{n}"
        await a.fresh(playbook, chosen)
        queries, vectors = a.some(held)
        boost = await ask_with(a.matrix, a.corpus, playbook, MODE, queries, vectors, a.options)
        trained, ranked = await a.ranked(playbook, held, clock)
        report.curve.append(CurvePoint(
            len(chosen), len({q for q, _ in chosen}), ranker_eval.ndcg(boost.run, qrels, held),
            ranker_eval.ndcg(ranked.run, qrels, held), trained))
        with contextlib.suppress(ServiceError):
            await a.vectord.delete_corpus(playbook)
    rows = {r.group: r for r in report.rows}
    if "held out" in rows and report.models:
        r = rows["held out"]
        report.curve.append(CurvePoint(len(pairs), len({q for q, _ in pairs}), r.boost, r.ranker,
                                       report.models[0]))
    report.seconds += clock.elapsed


async def cross_validated(a: Ask, name: str, pairs: Sequence[tuple[str, str]],
                          asked: set[str], qrels: Mapping[str, Mapping[str, int]],
                          folds: int) -> tuple[RankerReport, int, int]:
    """Fold f's questions asked with a playbook (and a model) of the other folds' pairs;
    the report over every question, and the pairs recorded and skipped over the folds."""
    clock = Clock()
    runs: dict[str, dict[str, list[str]]] = {k: {} for k in ("without", "boost", "ranker", "cv")}
    out = RankerReport(folds=folds)
    recorded = skipped = 0
    for f in range(folds):
        held = {q for q in asked if ranker_eval.fold(q, folds) == f}
        playbook = f"{name[:40]}_fold{f}"
        done, missing = await a.fresh(playbook, [(q, d) for q, d in pairs
                                                 if ranker_eval.fold(q, folds) != f])
        recorded, skipped = recorded + done, skipped + missing
        queries, vectors = a.some(held)
        without, boost = await ask_both(a.matrix, a.corpus, playbook, MODE, queries, vectors,
                                        a.options)
        trained, ranked = await a.ranked(playbook, held, clock)
        out.models.append(trained)
        runs["without"].update(without.run)
        runs["boost"].update(boost.run)
        runs["ranker"].update(ranked.run)
        if a.matrix_cv is not None:
            trained_cv, ranked_cv = await a.ranked(playbook, held, clock, cv=True)
            out.models_cv.append(trained_cv)
            runs["cv"].update(ranked_cv.run)
        with contextlib.suppress(ServiceError):
            await a.vectord.delete_corpus(playbook)
    groups = [(f"held out ({folds} folds)", set(asked))]
    out.rows = ranker_eval.rows(groups, qrels, runs["without"], runs["boost"], runs["ranker"],
                                runs["cv"] if a.matrix_cv is not None else None)
    return clock.close(out), recorded, skipped
