"""`lakehouse eval`: retrieval quality of every search mode on a BEIR-format data set."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from internal.common.errors import LakehouseError
from internal.evaluation.beir import DatasetError
from internal.evaluation.modes import table_modes
from lakehouse.wire.modes import FUSIONS

if TYPE_CHECKING:  # loaded by the command, not by `lakehouse --help`
    from internal.config import Config
    from internal.evaluation.runner import SearchOptions

T = TypeVar("T")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="retrieval quality of each mode on a BEIR data set",
        usage="lakehouse eval --dataset DIR --split NAME [options]",
        description=(
            "nDCG@10, Recall@100 and MRR@10 of each mode on DIR's judged queries"),
    )
    p.add_argument("--dataset", required=True, action="append", metavar="DIR",
                   help="BEIR folder; repeat it for several (and their mean)")
    p.add_argument("--split", required=True, action="append", metavar="NAME",
                   help="qrels/NAME.tsv: one for all, or one per --dataset")
    p.add_argument("--json", metavar="FILE", help="also write the table as JSON ('-': stdout)")
    modes = list(table_modes())
    p.add_argument("--modes", nargs="+", choices=modes, default=modes, metavar="M",
                   help="the modes (default: all of them)")
    p.add_argument("--corpus", help="the corpus caching one data set (eval_<name>)")
    p.add_argument("--model", help="the embedding model (default: embedd's)")
    p.add_argument("--in-process", action="store_true",
                   help="start vectord and embedd here even if some answer")
    p.add_argument("--cross-validate", nargs="?", type=int, const=5, default=None,
                   metavar="FOLDS", help="choose the default on held-out folds (5)")
    p.add_argument("--feedback-qrels", metavar="F",
                   help="record qrels F's pairs; score with and without them")
    p.add_argument("--holdout", type=float, default=0.2, metavar="SHARE",
                   help="share of F's queries held out (0.2)")
    p.add_argument("--folds", type=int, default=0, metavar="K",
                   help="the learned ranker by K-fold cross-validation")
    p.add_argument("--curve", metavar="N,N,...",
                   help="the ranker with the first N pairs only, e.g. 10,50,200")
    p.add_argument("--no-ranker", action="store_true",
                   help="the boost alone, no learned ranker")
    tune = p.add_argument_group("hybrid options (default: vectord's)")
    tune.add_argument("--fusion", choices=list(FUSIONS), metavar="NAME",
                      help=f"its fusion: {', '.join(FUSIONS)}")
    tune.add_argument("--rrf-k", type=int, metavar="K", help="RRF k of hybrid-rrf")
    tune.add_argument("--weights", metavar="V,L[,S]", help="branch weights (weighted, dbsf)")
    tune.add_argument("--candidates", type=int, metavar="N", help="candidates per branch")
    tune.add_argument("--prf", metavar="D,T,W",
                      help="feedback's docs,terms,weight, e.g. 10,10,0.5; 0: off")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> SearchOptions:
    from internal.evaluation.runner import SearchOptions

    hybrid: dict[str, Any] = {}
    if args.rrf_k is not None:
        hybrid["rrf_k"] = args.rrf_k
    if args.candidates is not None:
        hybrid["candidates"] = args.candidates
    if args.weights:
        try:
            values = [float(v) for v in args.weights.split(",")]
        except ValueError:
            raise SystemExit(f"--weights: expected numbers like 0.5,0.3,0.2, got {args.weights!r}") from None
        if not 2 <= len(values) <= 3:
            raise SystemExit("--weights: expected 2 or 3 numbers (vector,lexical[,symbolic])")
        hybrid["weights"] = dict(zip(("vector", "lexical", "symbolic"), values, strict=False))
    if args.fusion is not None:
        hybrid["fusion"] = args.fusion
    if args.prf:
        hybrid["prf"] = _prf(args.prf)
    return SearchOptions(hybrid=hybrid)


def _prf(text: str) -> dict[str, Any]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(f"--prf: expected numbers like 5,10,0.5, got {text!r}") from None
    if values == [0.0]:
        return {"docs": 0}
    if len(values) != 3:
        raise SystemExit("--prf: expected DOCS,TERMS,WEIGHT (or 0)")
    return {"docs": int(values[0]), "terms": int(values[1]), "weight": values[2]}


def _pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(data set folder, split) for each --dataset: one --split for all, or one each."""
    datasets, splits = list(args.dataset), list(args.split)
    if len(splits) == 1:
        splits = splits * len(datasets)
    if len(splits) != len(datasets):
        raise SystemExit(f"--split: give one, or one per --dataset ({len(datasets)}), "
                         f"got {len(splits)}")
    if args.corpus and len(datasets) > 1:
        raise SystemExit("--corpus: only with a single --dataset")
    return list(zip(datasets, splits, strict=True))


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty():
        print(f"\rembedding corpus: {done}/{total}", end="" if done < total else "\n",
              file=sys.stderr, flush=True)
    elif done == total or done % 1024 < 64:
        print(f"embedding corpus: {done}/{total}", file=sys.stderr, flush=True)


def _cache_dir(cfg: Config) -> Path:
    """Where document vectors are kept between runs (ingest.VectorCache)."""
    return Path(cfg.vectord.data_dir).parent / "eval-cache"


def _write_json(dest: str, doc: object) -> None:
    """--json: doc to the file dest, or to stdout for '-'."""
    text = json.dumps(doc, indent=2)
    if dest == "-":
        print(text)
    else:
        Path(dest).write_text(text + "\n", encoding="utf-8")


def _finished(work: Coroutine[Any, Any, T]) -> T:
    """The evaluation's result; a failure is one line and exit code 2 (bad input) or 1."""
    try:
        return asyncio.run(work)
    except (DatasetError, ValueError) as exc:
        print(f"eval: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except (LakehouseError, RuntimeError) as exc:
        print(f"eval: {getattr(exc, 'message', exc)}", file=sys.stderr)
        raise SystemExit(1) from None


def run(args: argparse.Namespace) -> int:
    from internal.common import logs
    from internal.evaluation.harness import evaluate_datasets
    from internal.evaluation.report import mean_json, mean_table

    pairs = _pairs(args)
    from internal.config import load_or_exit

    cfg = load_or_exit(Path(args.config) if args.config else None)
    logs.configure("warning", cfg.log.format)
    if args.cross_validate is not None:
        return _run_cross_validation(args, cfg, pairs)
    if args.feedback_qrels:
        if len(pairs) != 1:
            raise SystemExit("--feedback-qrels: only with a single --dataset")
        return _run_feedback(args, cfg, *pairs[0])
    reports = _finished(evaluate_datasets(
        cfg, pairs, args.modes, options=_options(args),
        corpus=args.corpus, in_process=args.in_process, progress=_progress,
        cache_dir=_cache_dir(cfg), model=args.model,
    ))
    print("\n\n".join(r.table() for r in reports))
    if len(reports) > 1:
        print("\n" + mean_table(reports))
    if args.json:
        _write_json(args.json, reports[0].to_json() if len(reports) == 1
                    else mean_json(reports))
    return 0 if all(r.ok for r in reports) else 1


def _run_feedback(args: argparse.Namespace, cfg: Config, dataset: str, split: str) -> int:
    from internal.evaluation.feedback import evaluate_feedback

    try:
        curve = [int(n) for n in args.curve.split(",")] if args.curve else []
    except ValueError:
        raise SystemExit(f"--curve: expected numbers like 10,50,200, got {args.curve!r}") from None
    report = _finished(evaluate_feedback(
        cfg, dataset, split, args.feedback_qrels, args.modes,
        holdout=args.holdout, options=_options(args), corpus=args.corpus,
        in_process=args.in_process, progress=_progress, cache_dir=_cache_dir(cfg),
        ranker=not args.no_ranker, folds=args.folds, curve=curve,
    ))
    print(report.table())
    if args.json:
        _write_json(args.json, report.to_json())
    return 0 if report.ok else 1


def _run_cross_validation(args: argparse.Namespace, cfg: Config,
                          pairs: list[tuple[str, str]]) -> int:
    from internal.evaluation import crossval
    from internal.evaluation.harness import cross_validate_datasets

    if args.cross_validate < 2:
        raise SystemExit(f"--cross-validate: expected at least 2 folds, got {args.cross_validate}")
    result = _finished(cross_validate_datasets(
        cfg, pairs, crossval.CANDIDATES, folds=args.cross_validate,
        in_process=args.in_process, progress=_progress, cache_dir=_cache_dir(cfg),
        model=args.model,
    ))
    names = ", ".join(Path(folder).name for folder, _ in pairs)
    print(f"hybrid search, nDCG@10 cross-validated over {args.cross_validate} folds of the "
          f"queries of {names} (each set's mean counts once)\n")
    print(crossval.table(result, default=crossval.AS_SHIPPED))
    if args.json:  # the shipped default's figures, each query's too
        _write_json(args.json, crossval.to_json(result, crossval.AS_SHIPPED))
    return 0
