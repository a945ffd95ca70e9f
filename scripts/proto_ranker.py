"""Prototype of a ranker learned from feedback: the data a search gives, then the model.

    # 1. against a stack started here (free ports, its own data dir): ingest SciFact,
    #    Cranfield and CISI, record their judged pairs in playbooks as
    #    `lakehouse eval --feedback-qrels` does, ask every judged question with and without
    #    them, and keep each question's fused candidates (var/rankproto/<set>.json)
    flock -s /tmp/lakehouse-heavy.lock .venv/bin/python scripts/proto_ranker.py collect
    # 2. no stack: features, LambdaMART (LightGBM) per fold, the tables
    #    (proto_ranker_fit.py, proto_ranker_report.py); --alpha 1 fixes the boost's weight
    flock -s /tmp/lakehouse-heavy.lock .venv/bin/python scripts/proto_ranker.py fit
    # 3. the cost of scoring 100 candidates beside the default search's p50, training time
    #    (proto_ranker_cost.py)
    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \
        .venv/bin/python scripts/proto_ranker.py cost

Splits. Judged questions go to five folds by sha256 of the query id (fold 0 is exactly
`lakehouse eval`'s held-out 20%). Playbook P_f holds the judged pairs (score 1) of every
question outside fold f; fold f's questions are asked with it (held out), and the others
with P_0 (asked again, as the eval's "asked again"). SciFact's learning curve records the
first 10, 50, 200 of P_0's pairs (sha256 order) and asks fold 0.

What a candidate carries: the default hybrid search's top 100 (vectord's `Hit`: ranks and
scores per layer, the fused score; text and title are taken from the data set again),
plus every answer recorded for a question within the playbook's distance, scored through
`include` (factor 1: the true scores); the plain BM25 of each (a lexical search with the
same `include`): the default hybrid's hits show the PRF-expanded BM25 only.
"""

from __future__ import annotations

import argparse
import asyncio

import proto_ranker_collect as collecting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("collect", "fit", "cost"))
    parser.add_argument("--sets", default=",".join(collecting.SETS))
    parser.add_argument("--alpha", type=float, default=None,
                        help="fit: the boost's weight in the initial score (default: chosen "
                             "with the trees by cross-validation)")
    args = parser.parse_args()
    names = [s for s in args.sets.split(",") if s]
    if args.step == "collect":
        asyncio.run(collecting.collect(names))
    elif args.step == "fit":
        import proto_ranker_report

        proto_ranker_report.report({n: collecting.load(n) for n in names}, args.alpha)
    else:
        import proto_ranker_cost

        asyncio.run(proto_ranker_cost.run())


if __name__ == "__main__":
    main()
