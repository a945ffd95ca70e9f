"""`lakehouse answer`: the question answered from the corpora, with its sources, written to
the terminal as the stack makes it (its stream of server-sent events)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from internal.cli.connect import add_url_arg, run_command
from internal.cli.output import print_json, shorten
from internal.cli.smart_cmd import print_hits

TIMEOUT = 120.0  # seconds without a word from the stack (a model may think a while)

if TYPE_CHECKING:  # annotations only: the client loads when a command runs (run_command)
    from lakehouse import AsyncClient
    from lakehouse.wire.answer import AnswerResponse, Citation


def print_sources(citations: list[Citation]) -> None:
    if not citations:
        return
    print("\nsources")
    for c in citations:
        where = f"{c.corpus}/{c.id}" + (f" — {shorten(c.title, 50)}" if c.title else "")
        print(f"  [{c.marker}] {where}")
        print(f"      {shorten(c.passage, 100)}")


def print_end(out: AnswerResponse) -> None:
    """After the text: the sources, or the nearest hits of a refusal; then the notes."""
    if out.answered:
        print_sources(out.citations)
    else:
        print(f"\nno answer ({out.reason}); the nearest hits:")
        print_hits(out.hits)
    notes = [out.generator.kind + (f" {out.generator.model}" if out.generator.model else "")]
    if out.generator.fallback:
        notes.append(f"the model failed ({out.generator.fallback}): extractive instead")
    if out.generator.dropped_markers:
        notes.append(f"{out.generator.dropped_markers} markers pointing nowhere dropped")
    if out.degraded:
        notes.append("degraded: " + ", ".join(out.degraded))
    notes.append(f"{out.took_ms} ms")
    print(f"({'; '.join(notes)})")


def _answer(args: argparse.Namespace) -> int:
    from lakehouse.wire.answer import DeltaEvent, DoneEvent, ResetEvent

    corpora = [c.strip() for c in (args.corpora or "").split(",") if c.strip()] or None
    options = {"corpora": corpora, "k": args.k, "mode": args.mode,
               "use_playbook": args.playbook, "generator": args.generator,
               "max_words": args.max_words}

    async def work(client: AsyncClient) -> int:
        if args.json:
            print_json(await client.answer(args.text, **options))
            return 0
        done = None
        async for event in client.answer_stream(args.text, **options):
            if isinstance(event, DeltaEvent):
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, ResetEvent):
                sys.stdout.write(f"\n(the model failed: {event.reason}; the quoted answer)\n")
            elif isinstance(event, DoneEvent):
                done = event.answer
        print()
        if done is not None:
            print_end(done)
        return 0

    return run_command(args, work, timeout=TIMEOUT)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("answer", help="answer a question from the corpora, with its sources",
                       description="The hits' sentences that answer the question (or the "
                       "model's text), cited, as they come; or why there is no answer.")
    p.add_argument("text")
    p.add_argument("--corpora", help="comma-separated corpus names (default: all)")
    p.add_argument("--k", type=int, default=10, help="hits the answer is drawn from")
    p.add_argument("--mode", help="the search's mode (default hybrid)")
    p.add_argument("--playbook", action="store_true", help="apply recorded feedback")
    p.add_argument("--generator", choices=("extractive", "model"),
                   help="quote the hits, or the configured model writes (its default)")
    p.add_argument("--max-words", type=int, help="the answer's length at most (default 60)")
    p.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    add_url_arg(p)
    p.set_defaults(func=_answer)
