"""`lakehouse ranker train|status`: the learned ranker (POST /v1/matrix/ranker/train,
GET /v1/matrix/ranker)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from internal.cli.connect import add_url_arg, run_command
from internal.cli.output import format_table, print_json

if TYPE_CHECKING:  # the client loads with the command that runs, not with --help
    from lakehouse import AsyncClient
    from lakehouse.wire.ranker import RankerModel

TRAIN_TIMEOUT = 1800.0  # seconds: a training waited for (SciFact's 919 records: seconds)


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def describe(m: RankerModel) -> str:
    """'model 7 (playbook_memory: handbook, tickets): 50 trees, ...' in one paragraph."""
    head = f"model {m.id} ({m.playbook_corpus}: {', '.join(m.corpora)})"
    if m.used:
        what = f"{m.trees} trees ranking searches with feedback (alpha {m.alpha:g})"
    else:
        what = f"the boost alone: {m.reason}"
    return (f"{head}: {what}\n  cross-validated nDCG@10 on the records: boost alone "
            f"{_figure(m.ndcg10_boost)}, learned ranker {_figure(m.ndcg10_ranker)}\n"
            f"  {m.records} records, {m.queries} questions, {m.examples} examples, "
            f"trained in {m.seconds:.1f} s by {m.trained_by} at "
            f"{m.created_at.isoformat()[:19]}")


def _train(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        corpora = [c.strip() for c in args.corpora.split(",") if c.strip()] if args.corpora \
            else None
        out = await client.train_ranker(corpora=corpora,
                                        playbook_corpus=args.playbook_corpus or None,
                                        wait=not args.no_wait)
        if args.json:
            print_json(out)
        elif args.no_wait:
            print(f"training on {out.playbook_corpus} ({', '.join(out.corpora or [])}); "
                  "lakehouse ranker status shows the model when it is stored")
        else:
            from lakehouse.wire.ranker import RankerModel

            assert isinstance(out, RankerModel)
            print(describe(out))
        return 0

    return run_command(args, work, timeout=TRAIN_TIMEOUT)


def _status(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        out = await client.rankers(playbook_corpus=args.playbook_corpus or None,
                                   limit=args.limit)
        if args.json:
            print_json(out)
            return 0
        current = [m for m in out.models if m.current]
        for m in current:
            print(describe(m))
        if not current:
            print("no model: searches with feedback use the boost alone"
                  + ("" if out.auto else " (training by itself is off)"))
        for t in out.training:
            print(f"training now: {t.playbook_corpus} ({', '.join(t.corpora or [])}), "
                  f"since {t.started_at.isoformat()[:19]}, by {t.trained_by}")
        for f in out.failures:
            print(f"last training failed: {f.playbook_corpus} at {f.at.isoformat()[:19]}: "
                  f"{f.error}")
        older = [m for m in out.models if not m.current]
        if older:
            rows = [[str(m.id), m.playbook_corpus, ",".join(m.corpora), str(m.trees),
                     _figure(m.ndcg10_boost), _figure(m.ndcg10_ranker),
                     m.created_at.isoformat()[:19]] for m in older]
            print("\nearlier versions:")
            print(format_table(["id", "playbook", "corpora", "trees", "cv boost", "cv ranker",
                                "created_at"], rows))
        return 0

    return run_command(args, work)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ranker", help="train the learned ranker or show its models")
    rsub = p.add_subparsers(dest="ranker_command", required=True, metavar="train|status")
    pt = rsub.add_parser("train", help="train on a playbook's records, print the model's figures")
    pt.add_argument("--corpora", help="comma-separated: the corpora it ranks (default: every "
                                      "corpus the records answer)")
    pt.add_argument("--playbook-corpus", help="default: matrixd's [matrixd] playbook_corpus")
    pt.add_argument("--no-wait", action="store_true", help="answer at once; it trains on")
    pt.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(pt)
    pt.set_defaults(func=_train)
    ps = rsub.add_parser("status", help="the models searches use, and why not when they don't")
    ps.add_argument("--playbook-corpus", help="only this playbook's models")
    ps.add_argument("--limit", type=int, default=20, help="versions listed (1..1000, 20)")
    ps.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(ps)
    ps.set_defaults(func=_status)
