"""What a Lakehouse backup folder holds and whether it can be restored: the pure part.

A backup is PostgreSQL's own base backup (`pg_basebackup`, plain format, WAL streamed
into it) plus `lakehouse-backup.json`, written last: a folder without it is not a
Lakehouse backup (or one that did not finish). An incremental backup names the backup it
builds on; restoring it combines the chain with `pg_combinebackup`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import msgspec

INFO_FILE = "lakehouse-backup.json"
MANIFEST_FILE = "backup_manifest"  # PostgreSQL's, beside PG_VERSION
FORMAT = 1


class BackupInfo(msgspec.Struct, forbid_unknown_fields=True):
    """lakehouse-backup.json."""

    format: int
    kind: str  # "full" | "incremental"
    pg_major: int
    started_at: str  # ISO 8601, UTC
    ended_at: str  # when the server ended the backup (its WAL end point)
    start_lsn: str
    end_lsn: str
    timeline: int
    corpora: int  # counted as the backup ended (writes may go on)
    items: int
    bytes: int
    source: str  # the data directory or the server it was taken from (no password)
    incremental_from: str | None = None  # the backup this one builds on (absolute path)


class NotABackup(Exception):
    """The folder cannot be restored; the message says why."""


def encode(info: BackupInfo) -> bytes:
    return msgspec.json.format(msgspec.json.encode(info), indent=2) + b"\n"


def read(folder: Path) -> BackupInfo:
    """The folder's backup description; NotABackup naming what is missing."""
    if not folder.is_dir():
        raise NotABackup(f"{folder}: no such folder")
    info = folder / INFO_FILE
    if not info.is_file():
        raise NotABackup(f"{folder}: not a Lakehouse backup (no {INFO_FILE}; a backup that "
                         "did not finish has none)")
    if not (folder / MANIFEST_FILE).is_file() or not (folder / "PG_VERSION").is_file():
        raise NotABackup(f"{folder}: not a Lakehouse backup ({MANIFEST_FILE} or PG_VERSION "
                         "missing)")
    try:
        out = msgspec.json.decode(info.read_bytes(), type=BackupInfo)
    except msgspec.DecodeError as exc:
        raise NotABackup(f"{info}: unreadable ({exc})") from None
    if out.format != FORMAT:
        raise NotABackup(f"{info}: format {out.format}, this Lakehouse reads {FORMAT}")
    return out


def chain(folder: Path, reader: Callable[[Path], BackupInfo] = read
          ) -> list[tuple[Path, BackupInfo]]:
    """The backups to combine, oldest (the full one) first, ending with `folder`."""
    out: list[tuple[Path, BackupInfo]] = []
    seen: set[Path] = set()
    here: Path | None = folder.resolve()
    while here is not None:
        if here in seen:
            raise NotABackup(f"{folder}: its chain of incremental backups loops at {here}")
        seen.add(here)
        info = reader(here)
        out.append((here, info))
        if info.kind == "incremental":
            if info.incremental_from is None:
                raise NotABackup(f"{here}: incremental, but names no earlier backup")
            here = Path(info.incremental_from)
        else:
            here = None
    return out[::-1]


def check_major(backup_major: int, server_major: int) -> None:
    """A backup restores into the same PostgreSQL major only (its files are that format)."""
    if backup_major > server_major:
        raise NotABackup(f"the backup is of PostgreSQL {backup_major}, newer than this "
                         f"Lakehouse's PostgreSQL {server_major}: restore it with a "
                         f"Lakehouse that ships PostgreSQL {backup_major}")
    if backup_major < server_major:
        raise NotABackup(f"the backup is of PostgreSQL {backup_major}, older than this "
                         f"Lakehouse's PostgreSQL {server_major}: restore it with the "
                         "Lakehouse that took it, then upgrade (pg_upgrade)")


_POINT = re.compile(r"write-ahead log (start|end) point: ([0-9A-F]+/[0-9A-F]+)"
                    r"(?: on timeline (\d+))?")


def wal_point(line: str) -> tuple[str, str, int | None] | None:
    """('start' | 'end', LSN, timeline) from a `pg_basebackup --verbose` line, else None."""
    m = _POINT.search(line)
    if m is None:
        return None
    return m.group(1), m.group(2), int(m.group(3)) if m.group(3) else None
