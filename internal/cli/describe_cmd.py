"""`lakehouse corpora describe NAME [TEXT]`: what a corpus is about. With TEXT its
description is set ("" clears it); without, its description and the words that set it
apart from the other corpora the key may see (its profile, kept by the service)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from internal.cli.connect import add_url_arg, run_command
from internal.cli.output import format_table, print_json

if TYPE_CHECKING:  # the client loads with the command that runs, not with --help
    from lakehouse import AsyncClient


def _describe(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        if args.text is not None:
            corpus = await client.describe_corpus(args.name, args.text or None)
            print(f"{corpus.name}: {corpus.description or '(no description)'}")
            return 0
        profile = await client.corpus_profile(args.name)
        if args.json:
            print_json(profile)
            return 0
        print(f"{profile.corpus}: {profile.description or '(no description)'}")
        if not profile.documents:
            print("no profile yet (it is built in the background once items arrive)")
            return 0
        state = "current" if profile.current else "being brought up to date"
        print(f"profile of {profile.documents} documents, {profile.lexemes} lexemes ({state})")
        rows = [[t.word, str(t.documents), f"{t.share:.3f}",
                 "" if t.others is None else f"{t.others:.3f}"] for t in profile.distinctive]
        if rows:
            print(format_table(["word", "documents", "share", "others' share"], rows))
        return 0

    return run_command(args, work)


def add(csub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = csub.add_parser("describe", help="show or set what a corpus is about",
                        epilog='example: lakehouse corpora describe tickets "Support tickets '
                               'of the help desk"')
    p.add_argument("name")
    p.add_argument("text", nargs="?", help='its description ("" clears it); none: show it')
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    add_url_arg(p)
    p.set_defaults(func=_describe)
