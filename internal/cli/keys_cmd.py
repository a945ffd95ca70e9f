"""`lakehouse keys create|list|revoke`: scoped API keys (admin; POST/GET/DELETE /v1/keys)."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from typing import TYPE_CHECKING, Any

from internal.cli.connect import add_url_arg, run_command
from internal.cli.output import format_table, print_json

if TYPE_CHECKING:  # the client loads with the command that runs, not with --help
    from lakehouse import AsyncClient


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _past(expires_at: str) -> bool:
    """Whether an RFC 3339 time is already past (a malformed one is the server's to refuse)."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (when if when.tzinfo else when.replace(tzinfo=UTC)) <= datetime.now(UTC)


async def _missing(client: AsyncClient, corpora: list[str]) -> list[str]:
    """The corpora named (not patterns) that do not exist, each with the nearest name; the
    patterns matching none, said as a warning."""
    from internal.common.suggest import did_you_mean

    names = [c.name for c in await client.list_corpora()]
    out = []
    for c in corpora:
        if any(ch in c for ch in "*?["):
            if not any(fnmatch.fnmatchcase(n, c) for n in names):
                print(f"warning: --corpora {c!r} matches no corpus yet", file=sys.stderr)
        elif c not in names:
            out.append(f"{c!r}{did_you_mean(c, names)}")
    return out


def _create(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        corpora = _csv(args.corpora)
        missing = await _missing(client, corpora)
        if missing and not args.allow_missing:
            print(f"error: no corpus {', '.join(missing)}: a key for it opens nothing until "
                  "it exists (--allow-missing creates the key anyway)", file=sys.stderr)
            return 1
        body: dict[str, Any] = {"name": args.name, "actions": _csv(args.actions),
                                "corpora": corpora}
        if args.expires_at:
            body["expires_at"] = args.expires_at
            if _past(args.expires_at):
                print(f"warning: --expires-at {args.expires_at} is past: the key opens nothing",
                      file=sys.stderr)
        out = await client.request("POST", "/v1/keys", body=body)
        if args.json:
            print_json(out)
            return 0
        print(f"key {out['id']} ({', '.join(out['actions'])} on {', '.join(out['corpora'])})")
        print(out["key"])
        print("the secret is shown this once; keep it where the application reads it")
        return 0

    return run_command(args, work)


def _list(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        out = await client.request("GET", "/v1/keys")
        if args.json:
            print_json(out)
            return 0
        rows = [[k["id"], k["name"], ",".join(k["actions"]), ",".join(k["corpora"]),
                 (k["expires_at"] or "")[:19], (k["last_used_at"] or "")[:19]]
                for k in out["keys"]]
        print(format_table(["id", "name", "actions", "corpora", "expires_at", "last_used_at"], rows)
              if rows else "no keys yet: lakehouse keys create NAME --actions search --corpora '*'")
        return 0

    return run_command(args, work)


def _revoke(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        for key_id in args.key_id:
            await client.request("DELETE", f"/v1/keys/{key_id}")
            print(f"revoked {key_id}")
        return 0

    return run_command(args, work)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("keys", help="create, list or revoke scoped API keys (admin)")
    ksub = p.add_subparsers(dest="keys_command", required=True, metavar="create|list|revoke")
    pc = ksub.add_parser("create", help="a new key; its secret is printed once")
    pc.add_argument("name")
    pc.add_argument("--actions", required=True,
                    help="comma-separated: search, read, write, feedback, admin")
    pc.add_argument("--corpora", required=True, help="comma-separated names or globs ('*': all)")
    pc.add_argument("--expires-at", default="", help="RFC 3339 time after which it opens nothing")
    pc.add_argument("--allow-missing", action="store_true",
                    help="create it even for corpora that do not exist yet")
    pc.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(pc)
    pc.set_defaults(func=_create)
    pl = ksub.add_parser("list", help="every key, never a secret")
    pl.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(pl)
    pl.set_defaults(func=_list)
    pr = ksub.add_parser("revoke", help="revoke keys by id (within a second everywhere)")
    pr.add_argument("key_id", nargs="+")
    add_url_arg(pr)
    pr.set_defaults(func=_revoke)
