"""Query intelligence from the command line: analyze a question, ask (smart search)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from internal.cli.connect import add_url_arg, run_command
from internal.cli.output import format_score, format_table, print_json, shorten

if TYPE_CHECKING:  # annotations only: the client loads when a command runs (run_command)
    from lakehouse import AsyncClient
    from lakehouse.types import MatrixHit, SmartSearchResponse


def _analyze(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        out = await client.analyze(args.text, now=args.now or None)
        if args.json:
            print_json(out)
            return 0
        ents = ", ".join(f"{e.name} ({e.type})" for e in out.entities) or "none"
        rng = out.temporal_range
        when = " ".join(f"{k} {v}" for k, v in (("start", rng.start), ("end", rng.end),
                                                 ("relative", rng.relative))
                        if v is not None) if rng is not None else ""
        print(f"question type   {out.question_type} (confidence {out.confidence})")
        print(f"complexity      {out.complexity}")
        print(f"entities        {ents}")
        print(f"time range      {when or 'none'}")
        print(f"needs           {', '.join(out.required_info_types)}")
        print("sub-queries")
        for i, q in enumerate(out.sub_queries, 1):
            print(f"  {i}. {q}")
        return 0

    return run_command(args, work)


def print_hits(hits: list[MatrixHit]) -> None:
    rows = [[str(h.rank or i + 1), h.corpus, h.id, format_score(h.merge_score),
             shorten(h.title or h.text, 60)]
            for i, h in enumerate(hits)]
    print(format_table(["#", "corpus", "id", "score", "title / text"], rows) if rows else "no hits")


def print_plan(out: SmartSearchResponse) -> None:
    plan: dict[str, Any] = out.plan or {}
    print(f"\nplan ({plan.get('execution')}, merge {plan.get('merge', {}).get('strategy')})")
    for q in plan.get("sub_queries", []):
        deps = f" after {q['depends_on']}" if q.get("depends_on") else ""
        must = q.get("filters", {}).get("must_match")
        extra = f" must mention {', '.join(must)}" if must else ""
        print(f"  [{q['id']}] {q['layer']:<7} {q['purpose']:<8} {q['query']}{deps}{extra}")
    print("\niterations")
    for it in out.iterations:
        print(f"  {it['iteration']}: {len(it['queries'])} queries, {it['took_ms']} ms"
              + (f", stopped: {it['stopped']}" if it.get("stopped") else ""))
        for m in it.get("missing", []):
            print(f"     missing {m['kind']}: {shorten(m['target'], 50)} ({m['reason']})")


def _ask(args: argparse.Namespace) -> int:
    corpora = [c.strip() for c in (args.corpora or "").split(",") if c.strip()]

    async def work(client: AsyncClient) -> int:
        out = await client.smart_search(args.text, corpora=corpora or None, k=args.k,
                                        max_iterations=args.max_iterations,
                                        now=args.now or None)
        if args.json:
            print_json(out)
            return 0
        print_hits(out.hits)
        print_plan(out)
        print(f"({out.searches} searches; {out.took_ms} ms)")
        return 0

    return run_command(args, work)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("analyze", help="a question's entities, time range, type, parts")
    p.add_argument("text")
    p.add_argument("--now", help="ISO 8601 time that relative dates resolve against")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(p)
    p.set_defaults(func=_analyze)

    p = sub.add_parser("ask", help="smart search's hits: plan, search the parts, reflect",
                       description="Smart search: the question planned, its parts searched, "
                       "the hits merged and reflected on. It gives hits; `lakehouse answer` "
                       "gives an answer with its sources.")
    p.add_argument("text")
    p.add_argument("--corpora", help="comma-separated corpus names (default: all)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--max-iterations", type=int, default=3)
    p.add_argument("--now", help="ISO 8601 time that relative dates resolve against")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(p)
    p.set_defaults(func=_ask)
