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
    "internal.cli.ha_cmd",       # ha status, ha switchover
    "internal.cli.backup_cmd",   # backup, restore
    "internal.cli.items_cmd",    # corpora [list|delete], items list|get|delete
    "internal.cli.ingest_cmd",   # ingest
    "internal.cli.client_cmd",   # reembed, search, record, playbooks
    "internal.cli.ranker_cmd",   # ranker train|status
    "internal.cli.smart_cmd",    # analyze, ask
    "internal.cli.answer_cmd",   # answer
    "internal.cli.keys_cmd",     # keys create|list|revoke
    "internal.cli.sync_cmd",     # sync
    "internal.cli.eval_cmd",     # eval
    "internal.cli.mcp_cmd",      # mcp (stdio)
)


# One example per command, shown at the end of its --help (the docs' tour uses the same).
EXAMPLES = {
    "up": "lakehouse up --log-dir var/logs --replicas 1",
    "status": "lakehouse status --url http://127.0.0.1:3210",
    "ha": "lakehouse ha status --json",
    "ha status": "lakehouse ha status --json",
    "ha switchover": "lakehouse ha switchover --to node2",
    "backup": "lakehouse backup backups/monday",
    "restore": "lakehouse restore backups/monday --force",
    "corpora": "lakehouse corpora",
    "corpora list": "lakehouse corpora list --json",
    "corpora delete": "lakehouse corpora delete old_notes --yes",
    "corpora convert": "lakehouse corpora convert handbook --precision float16",
    "corpora index": "lakehouse corpora index handbook --m 24 --ef-search 80",
    "items": "lakehouse items get wiki 'network.md#0'",
    "items list": "lakehouse items list wiki --prefix network.md",
    "items get": "lakehouse items get handbook vpn --json",
    "items delete": "lakehouse items delete handbook vpn printer-jam",
    "reembed": "lakehouse reembed docs --model nomic-embed-text --wait",
    "ingest": "lakehouse ingest docs/examples/handbook.jsonl --corpus handbook",
    "search": 'lakehouse search "printer jams after new toner" --corpora handbook,tickets --k 3',
    "record": 'lakehouse record "how do I set up the VPN" vpn --corpus handbook',
    "playbooks": "lakehouse playbooks list",
    "playbooks list": "lakehouse playbooks list --answer-corpus handbook --limit 20",
    "playbooks delete": "lakehouse playbooks delete PLAYBOOK_ID",
    "ranker": "lakehouse ranker status",
    "ranker train": "lakehouse ranker train --corpora handbook,tickets",
    "ranker status": "lakehouse ranker status --json",
    "keys": "lakehouse keys create agent --actions search --corpora 'team_a_*'",
    "keys create": "lakehouse keys create agent --actions search,read --corpora handbook,tickets",
    "keys list": "lakehouse keys list",
    "keys revoke": "lakehouse keys revoke KEY_ID",
    "analyze": 'lakehouse analyze "Who fixed the printer and why does the VPN drop?"',
    "ask": 'lakehouse ask "Who fixed the printer and why does the VPN drop?" --k 4',
    "answer": 'lakehouse answer "What do I do when the printer says paper jam?" --max-words 40',
    "sync": "lakehouse sync docs/examples/wiki --corpus wiki",
    "eval": "lakehouse eval --dataset ../shared/data/cranfield --split dev",
    "mcp": "lakehouse mcp --url http://127.0.0.1:3210",
}

MAIN_EPILOG = """\
example: lakehouse up    # the stack; `lakehouse COMMAND --help`: a command's"""


def version() -> str:
    """'lakehouse 0.1.0 (lakehouse-client 0.1.0)': the installed distributions' versions."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    def of(name: str) -> str:
        try:
            return installed(name)
        except PackageNotFoundError:
            return "not installed"

    return f"lakehouse {of('lakehouse')} (lakehouse-client {of('lakehouse-client')})"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """The commands listed without the COMMAND line above them (the help fits one screen)."""

    def _format_action(self, action: argparse.Action) -> str:
        if isinstance(action, argparse._SubParsersAction):
            return "".join(self._format_action(a) for a in action._get_subactions())
        return super()._format_action(action)


def build_parser() -> argparse.ArgumentParser:
    # No description: the commands' list says it, and the help fits one screen.
    parser = argparse.ArgumentParser(prog="lakehouse", epilog=MAIN_EPILOG,
                                     formatter_class=_Formatter)
    parser.add_argument("--config", help="lakehouse.toml (default: $LAKEHOUSE_CONFIG, ./)")
    parser.add_argument("--version", action="version", version=version(),
                        help="print the installed versions and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a subcommand not written yet
        module.register(sub)
    for command, p in commands(parser).items():
        example = EXAMPLES.get(command)
        if example and "example:" not in (p.description or ""):
            p.epilog = f"example: {example}"
    return parser


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its words after `lakehouse` ("playbooks list")."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, p in action.choices.items():
                out[prefix + name] = p
                out.update(commands(p, f"{prefix}{name} "))
    return out


# A command whose reader went away (`lakehouse items list c | head -5`) ends as the
# shell's tools do when a pipe closes: quietly, with 128 + SIGPIPE.
CLOSED_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader gone before the last line fails here, not at exit
    except BrokenPipeError:
        import os

        # Python flushes stdout once more at exit: point it at /dev/null, so that last
        # flush finds no closed pipe and prints no second traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
