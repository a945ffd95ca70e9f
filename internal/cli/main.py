"""The `lakehouse` command: run the stack, and talk to it as a person would.

Each subcommand lives in its own module exposing `register(subparsers)`, which adds
an argparse parser whose `func(args) -> int` runs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that register subcommands, in the order `lakehouse --help` lists them.
SUBCOMMAND_MODULES = (
    "internal.cli.stack_cmd",    # up, status
    "internal.cli.backup_cmd",   # backup, restore
    "internal.cli.client_cmd",   # corpora, ingest, search, record
    "internal.cli.smart_cmd",    # analyze, ask
    "internal.cli.sync_cmd",     # sync
    "internal.cli.eval_cmd",     # eval
    "internal.cli.mcp_cmd",      # mcp (stdio)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="path to lakehouse.toml (default: $LAKEHOUSE_CONFIG or ./lakehouse.toml)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a subcommand not written yet
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
