"""`lakehouse sync DIR --corpus NAME`: one sync run of a markdown folder, with a progress bar.

The run happens in this process (the same runner syncd uses), talking to the
gateway's /v1/vectors and /v1/embed routes through the public client, so no syncd
needs to be configured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from internal.cli.connect import add_url_arg, gateway_token, gateway_url, load_config
from internal.common.errors import InvalidArgument

if TYPE_CHECKING:  # loaded by the command, not by `lakehouse --help`
    from internal.syncd.runner import RunResult


def _languages(pairs: list[str], configured: dict[str, str]) -> dict[str, str]:
    """--lang FOLDER=CODE pairs on top of the config's [sync.languages]."""
    from internal.common import language

    out = dict(configured)
    for pair in pairs:
        folder, sep, code = pair.partition("=")
        if not sep or not code:
            raise SystemExit(f"error: --lang expects FOLDER=LANGUAGE (FOLDER '.' for the "
                             f"synced folder itself), got {pair!r}")
        try:
            language.normalize_language(code, "--lang")
        except InvalidArgument as exc:
            raise SystemExit(f"error: --lang {pair}: {exc.message}") from None
        out[folder or "."] = code
    return out


def _print_result(result: RunResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
        return
    print(f"added {result.added}, updated {result.updated}, deleted {result.deleted}, "
          f"unchanged {result.unchanged} ({result.pages} pages, {result.chunks} chunks, "
          f"{result.embedded_chunks} embedded) in {result.seconds:.1f}s")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for err in result.errors:
        print(f"error: {err.path}: {err.error}", file=sys.stderr)


def _sync(args: argparse.Namespace) -> int:
    from internal.cli import progress as progress_bar
    from internal.cli.gateway_store import GatewayStore
    from internal.common import logs
    from internal.syncd.runner import Syncer, SyncSettings
    from lakehouse import AsyncClient
    from lakehouse.errors import NotFound

    cfg = load_config(args)
    # The runner's log lines go to stderr, and only the ones that matter (stdout is the result).
    logs.configure("warning", "console")
    base = gateway_url(args)
    wiki = Path(args.dir).resolve()
    if not wiki.is_dir():
        print(f"error: {args.dir}: not a directory", file=sys.stderr)
        return 1
    settings = SyncSettings(
        wiki_dir=wiki, corpus=args.corpus,
        ignore=tuple(args.ignore) if args.ignore else cfg.sync.ignore,
        languages=_languages(args.lang or [], dict(cfg.sync.languages)),
        batch_size=args.batch_size or cfg.sync.batch_size, chunk_chars=cfg.sync.chunk_chars,
        model=args.model)

    async def go() -> RunResult:
        bar = progress_bar.bar(0, unit="chunk", desc=f"sync {args.corpus}",
                               disable=args.quiet)

        def progress(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
                bar.refresh()
            bar.update(done - bar.n)

        try:
            # Embedding a batch can take long on a small machine: syncd's embedd timeout.
            async with AsyncClient(base, gateway_token(args), timeout=120.0,
                                   retries=0) as client:
                store = GatewayStore(client)
                result = await Syncer(settings, store, store).request_run(progress)
                if args.description is not None:
                    with contextlib.suppress(NotFound):  # the run made no corpus
                        await client.describe_corpus(args.corpus, args.description)
                return result
        finally:
            bar.close()

    result = asyncio.run(go())
    _print_result(result, args.json)
    return 1 if result.errors else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sync", help="make a corpus equal a folder of markdown pages",
                       description=__doc__.splitlines()[0])
    p.add_argument("dir", help="the folder of .md pages")
    p.add_argument("--corpus", required=True, help="corpus to keep in sync (created if absent)")
    p.add_argument("--lang", action="append", metavar="FOLDER=LANG",
                   help="folder language, e.g. pages.de=de, or .=en for the synced folder "
                        "itself (repeatable; else detected)")
    p.add_argument("--ignore", action="append", metavar="GLOB",
                   help="ignore glob (repeatable; default from [sync] ignore)")
    p.add_argument("--description", metavar="TEXT",
                   help="what the corpus is about (\"\" clears it): a search over several "
                        "corpora weighs it by how much the question is about it")
    p.add_argument("--model", help="a new corpus's embedding model (default: the one "
                                   "for its pages' languages)")
    p.add_argument("--batch-size", type=int, default=0, help="texts per embedding call")
    p.add_argument("--json", action="store_true", help="print the run result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_url_arg(p)
    p.set_defaults(func=_sync)
