"""Backups of Lakehouse's PostgreSQL with PostgreSQL's own tools, and their restore.

`pg_basebackup` (plain format, WAL streamed into the backup, `--incremental` against an
earlier backup's manifest) takes an online, consistent copy while writes go on;
`pg_combinebackup` folds a chain of incremental backups into one data directory. Both
ship in the embedded server's wheel; nothing here reimplements what they do. The
decisions (what makes a folder a backup, the checks before a restore) are manifest.py's.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from internal.backup import manifest
from internal.backup.manifest import BackupInfo, NotABackup
from internal.common.dsn import redacted
from internal.pg.embedded import import_pgserver, postmaster_pid

# Settings a server needs for what `lakehouse backup` offers (the embedded server has
# them, see internal.pg.embedded): WAL summaries for incremental backups.
INCREMENTAL_SETTING = "summarize_wal"


class BackupRefused(Exception):
    """Nothing was done: the message says why and what to do."""


def bin_dir() -> Path:
    """The folder of the PostgreSQL programs the embedded server's wheel ships."""
    import_pgserver()
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def server_major() -> int:
    """The PostgreSQL major version of the programs shipped (18 for 18.1)."""
    out = subprocess.run([str(bin_dir() / "postgres"), "--version"], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"(\d+)(?:\.\d+)?", out)
    if m is None:
        raise RuntimeError(f"postgres --version said {out!r}")
    return int(m.group(1))


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def counts(dsn: str) -> tuple[int, int]:
    """(corpora, items) in the server's vectord catalog now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('vectord_corpora') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0, 0
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM vectord_corpora").fetchall()]
        items = 0
        for cid in ids:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(f"vectord_items_{cid}"))).fetchone()
            items += int(row[0]) if row else 0
        return len(ids), items


def take(dsn: str, folder: Path, *, source: str,
         incremental_from: Path | None = None) -> BackupInfo:
    """An online backup of the server at `dsn` into `folder` (absent or empty).

    The description file is written last, so a backup cut short is never mistaken for a
    good one; a failed pg_basebackup leaves nothing behind."""
    folder = folder.resolve()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BackupRefused(f"{folder}: not an empty folder; a backup goes into a new one")
    previous: BackupInfo | None = None
    if incremental_from is not None:
        incremental_from = incremental_from.resolve()
        previous = manifest.read(incremental_from)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    args = [str(bin_dir() / "pg_basebackup"), "-D", str(folder), "-d", dsn, "-X", "stream",
            "-c", "fast", "--verbose", "--no-password"]
    if incremental_from is not None:
        args += ["--incremental", str(incremental_from / manifest.MANIFEST_FILE)]
    started = _now()
    points: dict[str, tuple[str, int | None]] = {}
    ended = ""
    said: list[str] = []
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        said.append(line.rstrip())
        point = manifest.wal_point(line)
        if point is not None:
            points[point[0]] = (point[1], point[2])
            if point[0] == "end":
                ended = _now()  # the server has ended the backup: what it holds is fixed
    if proc.wait() != 0 or "end" not in points or "start" not in points:
        _remove(folder, created)
        detail = "; ".join(line for line in said if "error" in line.lower()) or said[-1:]
        hint = ""
        if incremental_from is not None and INCREMENTAL_SETTING in str(detail):
            hint = (f" (incremental backups need {INCREMENTAL_SETTING} = on on the server "
                    "since the earlier backup was taken)")
        raise RuntimeError(f"pg_basebackup failed: {detail}{hint}")
    drop_server_files(folder)
    corpora, items = counts(dsn)
    info = BackupInfo(
        format=manifest.FORMAT, kind="incremental" if previous else "full",
        pg_major=int((folder / "PG_VERSION").read_text().strip()), started_at=started,
        ended_at=ended, start_lsn=points["start"][0], end_lsn=points["end"][0],
        timeline=points["start"][1] or 1, corpora=corpora, items=items,
        bytes=_size(folder), source=redacted(source),
        incremental_from=str(incremental_from) if incremental_from else None)
    path = folder / manifest.INFO_FILE
    with open(path, "wb") as f:
        f.write(manifest.encode(info))
        f.flush()
        os.fsync(f.fileno())
    return info


def drop_server_files(folder: Path) -> None:
    """Files of the server that was running, not of its data: the embedded server keeps
    its socket (and the socket's lock file, naming its postmaster) in the data directory,
    and pg_basebackup copies them; a server started on the copy would refuse to start
    while the original runs."""
    for stale in (*folder.glob(".s.PGSQL.*"), folder / "postmaster.pid",
                  folder / ".handle_pids.json"):
        stale.unlink(missing_ok=True)


def _remove(folder: Path, created: bool) -> None:
    if created:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


@dataclass(frozen=True)
class Restored:
    info: BackupInfo  # the newest backup of the chain
    chain: int  # backups combined (1: a full backup alone)
    data_dir: Path
    moved_aside: Path | None  # where the data directory that was there went (--force)


def restore(folder: Path, data_dir: Path, *, force: bool = False,
            until: dt.datetime | None = None, wal_dir: str = "") -> Restored:
    """Put the backup (and, for an incremental one, its chain) back as `data_dir`.

    until: then replay the WAL archived in wal_dir on top of it, up to that time
    (PostgreSQL's archive recovery), and promote. Refused, with nothing changed, when the
    folder is not a backup, its PostgreSQL is another major, a server runs in data_dir,
    data_dir holds data and not `force` (which moves it aside, never deletes it), or
    `until` has no archive to replay or comes before the backup's end."""
    if until is not None:
        if until.tzinfo is None:
            raise BackupRefused("--until: give a time zone (e.g. 2026-11-24T14:50:00Z)")
        if not wal_dir or not Path(wal_dir).is_dir():
            raise BackupRefused("--until: needs the WAL archive of [backup] wal_dir "
                                f"({wal_dir or 'not set'})")
    links = manifest.chain(folder)
    newest = links[-1][1]
    manifest.check_major(newest.pg_major, server_major())
    if until is not None and newest.ended_at and until < dt.datetime.fromisoformat(
            newest.ended_at):
        raise BackupRefused(f"--until {until.isoformat()}: before the backup ended "
                            f"({newest.ended_at}); restore an earlier backup")
    data_dir = data_dir.resolve()
    pid = postmaster_pid(data_dir)
    if pid is not None:
        raise BackupRefused(f"PostgreSQL is running in {data_dir} (pid {pid}): stop the "
                            "stack first (Ctrl-C on `lakehouse up`)")
    occupied = data_dir.exists() and any(data_dir.iterdir())
    if occupied and not force:
        raise BackupRefused(f"{data_dir}: holds data; restore with --force to move it aside "
                            "(it is kept, renamed) and put the backup in its place")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    staging = data_dir.with_name(f".{data_dir.name}.restoring-{stamp}")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        if len(links) == 1:
            shutil.copytree(links[0][0], staging, symlinks=True)
        else:
            subprocess.run([str(bin_dir() / "pg_combinebackup"), "-o", str(staging),
                            *(str(p) for p, _ in links)], check=True, capture_output=True,
                           text=True)
        (staging / manifest.INFO_FILE).unlink(missing_ok=True)
        drop_server_files(staging)
        if until is not None:
            _recovery_settings(staging, until, wal_dir)
        own_data_dir(staging)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"pg_combinebackup failed: {exc.stderr.strip()}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    aside: Path | None = None
    if occupied:
        aside = data_dir.with_name(f"{data_dir.name}.replaced-{stamp}")
        data_dir.rename(aside)
    elif data_dir.exists():
        data_dir.rmdir()
    staging.rename(data_dir)
    if until is not None:
        _recover(data_dir, until)
    return Restored(newest, len(links), data_dir, aside)


def _recovery_settings(folder: Path, until: dt.datetime, wal_dir: str) -> None:
    """Archive recovery up to `until` from wal_dir, then promotion (recovery.signal)."""
    quoted = wal_dir.replace("'", "''")
    with open(folder / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
        conf.write(f"restore_command = 'cp \"{quoted}/%f\" \"%p\"'\n"
                   f"recovery_target_time = '{until.isoformat()}'\n"
                   "recovery_target_action = 'promote'\n")
    (folder / "recovery.signal").touch()


# Settings of the archive recovery, dropped once the server has been promoted.
_RECOVERY_KEYS = ("restore_command", "recovery_target_time", "recovery_target_action")


def _recover(data_dir: Path, until: dt.datetime, timeout: float = 600.0) -> None:
    """Start the server on the restored directory, wait for the recovery to reach
    `until` and promote, then stop it (the stack starts it as usual)."""
    import time

    from internal.pg import embedded

    try:
        server = embedded.start(data_dir)
    except RuntimeError as exc:
        raise RuntimeError(f"recovery to {until.isoformat()} failed (does the archive reach "
                           f"it? see {data_dir / 'log'}): {exc}") from None
    try:
        deadline = time.monotonic() + timeout
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                if row is not None and not row[0]:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"recovery to {until.isoformat()} still running "
                                       f"after {timeout:g}s")
                time.sleep(0.2)
            for key in _RECOVERY_KEYS:
                conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(key)))
            conn.execute("SELECT pg_reload_conf()")
    except psycopg.OperationalError as exc:
        raise RuntimeError(f"recovery to {until.isoformat()} stopped (the archive may not "
                           f"reach it; see {data_dir / 'log'}): {exc}") from None
    finally:
        server.stop()


def own_data_dir(folder: Path) -> None:
    """Files owned and private as the server wants them: run as root, the embedded server
    runs as its own system user (pgserver's), which must own the data directory."""
    folder.chmod(0o700)
    if os.geteuid() != 0:
        return
    import pwd

    import_pgserver()
    from pgserver.utils import ensure_user_exists

    user = "pgserver"
    ensure_user_exists(user)
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(folder):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def describe(info: BackupInfo) -> str:
    """What a backup holds, as `lakehouse backup` prints it."""
    mb = info.bytes / 2**20
    base = f", on top of {info.incremental_from}" if info.incremental_from else ""
    return (f"{info.kind} backup of PostgreSQL {info.pg_major} from {info.source}{base}\n"
            f"  corpora {info.corpora}, items {info.items:,} (counted as it ended), "
            f"{mb:,.1f} MB\n"
            f"  WAL {info.start_lsn} .. {info.end_lsn} on timeline {info.timeline}; "
            f"ended {info.ended_at}")


__all__ = ["BackupInfo", "BackupRefused", "NotABackup", "Restored", "describe", "restore",
           "take"]
