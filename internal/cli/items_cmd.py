"""`lakehouse corpora [list|delete|convert]` and `lakehouse items list|get|delete`: what is stored,
listed, read and removed, through the public client (any id: the client percent-encodes
it)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from internal.cli import describe_cmd
from internal.cli.connect import add_url_arg, run_command
from internal.cli.output import format_table, print_json

if TYPE_CHECKING:  # the client loads with the command that runs, not with --help
    from lakehouse import AsyncClient


def _corpora(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        corpora = await client.list_corpora()
        if args.json:
            print_json(corpora)
            return 0
        rows = [[c.name, str(c.count), str(c.dim), c.metric, c.precision, c.language,
                 c.model or ""] for c in corpora]
        print(format_table(["corpus", "items", "dim", "metric", "precision", "language",
                            "model"], rows) if rows
              else "no corpora yet: lakehouse ingest FILE.jsonl --corpus NAME")
        return 0

    return run_command(args, work)


def _list(args: argparse.Namespace) -> int:
    import msgspec

    async def work(client: AsyncClient) -> int:
        shown = 0
        page = min(args.limit, 1000) if args.limit else 1000
        async for row in client.iter_ids(args.corpus, prefix=args.prefix or None,
                                         page_size=page):
            if args.json:
                print(msgspec.json.encode(row).decode())
            else:
                print(row.id)
            shown += 1
            if args.limit and shown >= args.limit:
                break
        if not shown:
            print(f"no items in {args.corpus!r}"
                  + (f" with ids starting {args.prefix!r}" if args.prefix else ""),
                  file=sys.stderr)
        return 0

    return run_command(args, work)


def _get(args: argparse.Namespace) -> int:
    import msgspec

    async def work(client: AsyncClient) -> int:
        item = await client.get_item(args.corpus, args.id)
        if args.json:
            out = msgspec.to_builtins(item)
            if not args.vector:
                out.pop("vector", None)
            print_json(out)
            return 0
        fields = [("id", item.id), ("corpus", item.corpus), ("title", item.title or ""),
                  ("tags", ", ".join(item.tags)), ("language", item.language or ""),
                  ("updated_at", item.updated_at.isoformat() if item.updated_at else "")]
        if item.metadata:
            fields.append(("metadata", msgspec.json.encode(item.metadata).decode()))
        for name, value in fields:
            print(f"{name}: {value}")
        print()
        print(item.text)
        return 0

    return run_command(args, work)


def _ids_of(args: argparse.Namespace) -> list[str]:
    """The ids named, or read from stdin one a line for `-`."""
    if args.ids == ["-"]:
        return [line.rstrip("\r\n") for line in sys.stdin if line.rstrip("\r\n")]
    return list(args.ids)


def _delete(args: argparse.Namespace) -> int:
    ids = _ids_of(args)

    async def work(client: AsyncClient) -> int:
        deleted = await client.delete_items(args.corpus, ids)
        missing = len(set(ids)) - deleted
        print(f"deleted {deleted} of {len(set(ids))} items from {args.corpus!r}"
              + (f" ({missing} not there)" if missing else ""))
        return 0

    if not ids:
        print("error: no ids to delete", file=sys.stderr)
        return 1
    return run_command(args, work)


def _confirmed(question: str) -> bool:
    """A yes from the person at stdin (no answer, as at the end of a pipe, is a no)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not answer:
        print(file=sys.stderr)
    return answer.strip().lower() in ("y", "yes")


def _corpus_delete(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        corpus = await client.get_corpus(args.name)
        if not args.yes and not _confirmed(
                f"delete corpus {corpus.name!r} and its {corpus.count} items?"):
            print(f"not deleted: {corpus.name!r} (--yes deletes without asking)",
                  file=sys.stderr)
            return 1
        await client.delete_corpus(corpus.name)
        print(f"deleted corpus {corpus.name!r} ({corpus.count} items)")
        return 0

    return run_command(args, work)


def _corpus_convert(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        started = await client.convert(args.name, args.precision)
        print(f"converting corpus {started.corpus!r} to {started.precision} in the background "
              f"({started.total} items); searches answer throughout. Progress: lakehouse status")
        return 0

    return run_command(args, work)


def _corpus_index(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        changed = await client.index_settings(
            args.name, m=args.m, ef_construction=args.ef_construction,
            ef_search=args.ef_search, exact_scan_rows=args.exact_scan_rows)
        s = changed.index
        print(f"corpus {changed.corpus!r}: m {s.m}, ef_construction {s.ef_construction}, "
              f"ef_search {s.ef_search}, exact_scan_rows {s.exact_scan_rows}")
        if changed.reindex is not None:
            print(f"rebuilding its graph with m {changed.reindex.m}, ef_construction "
                  f"{changed.reindex.ef_construction} in the background; searches answer "
                  "throughout. Progress: lakehouse corpora list --json (`reindex`)")
        return 0

    return run_command(args, work)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("corpora", help="list the corpora and their sizes; delete one",
                       usage="lakehouse corpora [list|delete|convert|index|describe NAME] [options]")
    add_url_arg(p)
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.set_defaults(func=_corpora)  # `lakehouse corpora` alone lists
    csub = p.add_subparsers(dest="corpora_command", metavar="list|delete|convert|index|describe",
                            prog="lakehouse corpora")
    pl = csub.add_parser("list", help="the corpora and their sizes (the default)")
    pl.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(pl)
    pl.set_defaults(func=_corpora)
    pd = csub.add_parser("delete", help="delete a corpus and its items (asks first)")
    pd.add_argument("name")
    pd.add_argument("--yes", action="store_true", help="delete without asking")
    add_url_arg(pd)
    pd.set_defaults(func=_corpus_delete)
    pc = csub.add_parser("convert", help="store a corpus's vectors in another precision, "
                         "online (float16: half the memory, the same quality)")
    pc.add_argument("name")
    pc.add_argument("--precision", required=True, choices=("float16", "float32"))
    add_url_arg(pc)
    pc.set_defaults(func=_corpus_convert)
    pi = csub.add_parser("index", help="change a corpus's vector index settings, online")
    pi.add_argument("name")
    pi.add_argument("--m", type=int, help="graph neighbours a node (rebuilds the graph)")
    pi.add_argument("--ef-construction", type=int, help="the build's candidates (rebuilds)")
    pi.add_argument("--ef-search", type=int, help="a search's candidates unless it names some")
    pi.add_argument("--exact-scan-rows", type=int, metavar="N",
                    help="a filter matching at most N items is scanned exactly")
    add_url_arg(pi)
    pi.set_defaults(func=_corpus_index)
    describe_cmd.add(csub)

    p = sub.add_parser("items", help="list, read or delete a corpus's items")
    isub = p.add_subparsers(dest="items_command", required=True, metavar="list|get|delete")

    pl = isub.add_parser("list", help="the ids, one a line, in id order")
    pl.add_argument("corpus")
    pl.add_argument("--prefix", help="only ids starting with this")
    pl.add_argument("--limit", type=int, default=0, metavar="N", help="at most N (default all)")
    pl.add_argument("--json", action="store_true",
                    help="a JSON object a line: id, content_hash, updated_at")
    add_url_arg(pl)
    pl.set_defaults(func=_list)

    pg = isub.add_parser("get", help="one item: its fields, then its text")
    pg.add_argument("corpus")
    pg.add_argument("id", help="the item's id, as stored (any characters)")
    pg.add_argument("--json", action="store_true", help="print the item as JSON")
    pg.add_argument("--vector", action="store_true", help="with --json: the vector too")
    add_url_arg(pg)
    pg.set_defaults(func=_get)

    pd = isub.add_parser("delete", help="delete items by id")
    pd.add_argument("corpus")
    pd.add_argument("ids", nargs="+", metavar="ID", help="ids, or - to read them from stdin")
    add_url_arg(pd)
    pd.set_defaults(func=_delete)
