"""`lakehouse backup DIR` and `lakehouse restore DIR`: PostgreSQL's base backups of the stack."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

BACKUP_HELP = """\
Take an online, consistent backup of Lakehouse's PostgreSQL while writes go on
(pg_basebackup, WAL included), into DIR (new or empty). The embedded server of
[vectord] data_dir is used (started for the backup if the stack is not running),
or the server of [vectord] dsn / --dsn.

example:
  lakehouse backup backups/monday
  lakehouse backup backups/tuesday --incremental-from backups/monday
"""

RESTORE_HELP = """\
Put a backup back as the embedded server's data directory ([vectord] data_dir),
with the stack stopped. An incremental backup is combined with the backups it
builds on (pg_combinebackup). A data directory that holds data is refused unless
--force, which moves it aside (renamed, kept) before the backup takes its place.

example:
  lakehouse restore backups/tuesday --force && lakehouse up
  lakehouse restore backups/monday --force --until 2026-11-24T14:50:00Z
"""


def _backup(args: argparse.Namespace) -> int:
    from internal.backup import pgbackup
    from internal.backup.manifest import NotABackup
    from internal.common import logs
    from internal.config import load_or_exit
    from internal.stack import postgres

    cfg = load_or_exit(Path(args.config) if args.config else None)
    logs.configure("warning", cfg.log.format)
    dsn = args.dsn or cfg.vectord.dsn
    if not dsn:  # `lakehouse up --ha`: copy a streaming replica of the cluster
        from internal.cli.ha_cmd import backup_dsn

        dsn = backup_dsn(cfg) or ""
    data_dir = Path(cfg.vectord.data_dir).expanduser().resolve()
    if not dsn and not (data_dir / "PG_VERSION").is_file():
        # Starting the embedded server here would make a new, empty cluster: a backup
        # that holds nothing, reported as a success. Nothing is created.
        print(f"backup: no PostgreSQL data directory at {data_dir} ([vectord] data_dir): "
              "nothing to back up; point data_dir (or --dsn) at the stack's data",
              file=sys.stderr)
        return 2
    server = None
    try:
        if dsn:
            source = dsn
        else:
            server = postgres.start(cfg.vectord.data_dir, cfg.backup.wal_dir)
            dsn, source = server.dsn, str(server.data_dir)
        info = pgbackup.take(dsn, Path(args.dir), source=source,
                             incremental_from=Path(args.incremental_from)
                             if args.incremental_from else None)
    except (pgbackup.BackupRefused, NotABackup) as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            postgres.stop(server)
    print(f"{Path(args.dir).resolve()}: {pgbackup.describe(info)}")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from internal.backup import pgbackup
    from internal.backup.manifest import NotABackup
    from internal.config import load_or_exit

    cfg = load_or_exit(Path(args.config) if args.config else None)
    if cfg.vectord.dsn:
        print("restore: [vectord] dsn names an external server: restore it with its "
              "operator's tools (pg_basebackup backups restore by copying them into its "
              "data directory); this command restores the embedded server", file=sys.stderr)
        return 2
    until = None
    if args.until:
        try:
            until = dt.datetime.fromisoformat(args.until)
        except ValueError:
            print(f"restore: --until: not a time like 2026-11-24T14:50:00Z: {args.until!r}",
                  file=sys.stderr)
            return 2
    try:
        done = pgbackup.restore(Path(args.dir), Path(cfg.vectord.data_dir), force=args.force,
                                until=until, wal_dir=cfg.backup.wal_dir)
    except (pgbackup.BackupRefused, NotABackup) as exc:
        print(f"restore: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"restore: {exc}", file=sys.stderr)
        return 1
    combined = f" (a chain of {done.chain} backups, combined)" if done.chain > 1 else ""
    print(f"restored {Path(args.dir).resolve()}{combined} into {done.data_dir}")
    print(pgbackup.describe(done.info))
    if until is not None:
        print(f"recovered to {until.isoformat()} from the WAL archive in {cfg.backup.wal_dir}")
    if done.moved_aside is not None:
        print(f"the data directory that was there is kept as {done.moved_aside}")
    print("start the stack: lakehouse up")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("backup", help="online backup of the stack's PostgreSQL into DIR",
                       description=BACKUP_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="new or empty folder for the backup")
    p.add_argument("--incremental-from", metavar="PREV",
                   help="copy only what changed since the backup in PREV (PostgreSQL 17+)")
    p.add_argument("--dsn", help="back up this server instead of the configured one")
    p.set_defaults(func=_backup)
    p = sub.add_parser("restore", help="put a backup back as the data directory",
                       description=RESTORE_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a folder `lakehouse backup` wrote")
    p.add_argument("--force", action="store_true",
                   help="move a data directory that holds data aside (kept) and restore")
    p.add_argument("--until", metavar="TIME",
                   help="then replay the WAL archive ([backup] wal_dir) up to TIME "
                        "(ISO 8601 with a zone, e.g. 2026-11-24T14:50:00Z)")
    p.set_defaults(func=_restore)
