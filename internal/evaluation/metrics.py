"""Retrieval metrics through ir-measures (pytrec_eval underneath), never by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
from ir_measures import RR, R, nDCG

# Name in our tables -> ir-measures measure.
MEASURES = {
    "ndcg@10": nDCG @ 10,
    "recall@100": R @ 100,
    "mrr@10": RR @ 10,
}

Run = Mapping[str, Sequence[str]]  # query id -> doc ids, best first


def evaluate(run: Run, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean of each measure over every judged query.

    pytrec_eval leaves out queries that retrieved nothing, which would flatter a
    mode that fails on hard queries; those count as 0 here instead. Scores given to
    pytrec_eval are derived from rank, because it re-sorts by score and breaks ties
    by doc id, which would not be the order the engine returned.
    """
    qrel_rows, run_rows = _rows(run, qrels)
    sums = dict.fromkeys(MEASURES, 0.0)
    by_measure = {m: name for name, m in MEASURES.items()}
    for metric in ir_measures.iter_calc(list(MEASURES.values()), qrel_rows, run_rows):
        sums[by_measure[metric.measure]] += float(metric.value)
    n = len(qrels)
    return {name: (total / n if n else 0.0) for name, total in sums.items()}


def ndcg10_per_query(run: Run, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """nDCG@10 of each judged query (0 for one that retrieved nothing), as `evaluate` scores it."""
    qrel_rows, run_rows = _rows(run, qrels)
    out = dict.fromkeys(qrels, 0.0)
    for metric in ir_measures.iter_calc([nDCG @ 10], qrel_rows, run_rows):
        out[metric.query_id] = float(metric.value)
    return out


def _rows(run: Run, qrels: Mapping[str, Mapping[str, int]]
          ) -> tuple[list[ir_measures.Qrel], list[ir_measures.ScoredDoc]]:
    """ir-measures' rows; scores derived from rank (see `evaluate`)."""
    qrel_rows = [
        ir_measures.Qrel(qid, did, int(grade))
        for qid, docs in qrels.items()
        for did, grade in docs.items()
    ]
    run_rows = [
        ir_measures.ScoredDoc(qid, did, float(len(ids) - rank))
        for qid, ids in run.items()
        if qid in qrels
        for rank, did in enumerate(ids)
    ]
    return qrel_rows, run_rows
