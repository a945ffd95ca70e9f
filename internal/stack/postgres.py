"""The embedded PostgreSQL as `lakehouse up` holds it: started once, stopped on the way out."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import structlog

from internal.pg import embedded
from internal.pg.embedded import postmaster_pid as postmaster_pid  # where backup reads it too

log = structlog.get_logger()

# pgserver counts the processes holding a server in this file and stops it when the
# last one lets go; a holder killed with SIGKILL stays listed and the server would
# never stop, so dead holders are dropped before we take our handle.
_HANDLES = ".handle_pids.json"


def prune_dead_holders(data_dir: Path) -> list[int]:
    """Remove pids of processes that no longer exist from pgserver's holder list."""
    path = data_dir / _HANDLES
    try:
        pids = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return []
    alive = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p)]
    dead = [p for p in pids if p not in alive]
    if dead:
        path.write_text(json.dumps(alive))
        log.info("postgres_dead_holders_pruned", pids=dead)
    return dead


def start(data_dir: str, wal_dir: str | None = None) -> embedded.EmbeddedPostgres:
    """The embedded server of data_dir; wal_dir as embedded.start takes it."""
    path = Path(data_dir).expanduser().resolve()
    prune_dead_holders(path)
    return embedded.start(path, wal_dir=wal_dir)


def stop(server: embedded.EmbeddedPostgres, wait: float = 15.0) -> bool:
    """Let go of the server and wait for the postmaster to exit; True when it did."""
    pid = postmaster_pid(server.data_dir)
    server.stop()
    if pid is None:
        return True
    try:
        psutil.Process(pid).wait(wait)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        log.warning("postgres_still_running", pid=pid, data_dir=str(server.data_dir))
        return False
    return True


def alive(data_dir: Path) -> bool:
    """Is the postmaster of data_dir running (a zombie is not)?"""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def standby_dir(data_dir: Path, n: int) -> Path:
    """Where `lakehouse up --replicas` keeps standby n (1-based), beside the primary."""
    return data_dir.with_name(f"{data_dir.name}-replica-{n}")


def start_standby(primary: embedded.EmbeddedPostgres, n: int) -> embedded.EmbeddedPostgres:
    """A streaming standby of the embedded primary, made on first use and started.

    Made with `pg_basebackup -R` and a physical replication slot per standby, so the
    primary keeps the WAL a standby that was down still needs (up to the primary's
    max_slot_wal_keep_size); a standby folder that exists is started as it is and
    catches up from the slot."""
    import subprocess

    import psycopg

    from internal.backup import pgbackup

    folder = standby_dir(primary.data_dir, n)
    slot = f"lakehouse_replica_{n}"
    if not (folder / "standby.signal").exists():
        if folder.exists():
            import shutil

            shutil.rmtree(folder)  # a copy that never finished
        with psycopg.connect(primary.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s", (slot,))
        subprocess.run([str(pgbackup.bin_dir() / "pg_basebackup"), "-D", str(folder), "-d",
                        primary.dsn, "-X", "stream", "-R", "-C", "-S", slot, "-c", "fast"],
                       check=True, capture_output=True, text=True)
        # Vacuum on the primary must not cancel a search running on the standby.
        with open(folder / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
            conf.write("hot_standby_feedback = 'on'\n")
        pgbackup.drop_server_files(folder)
        pgbackup.own_data_dir(folder)
        log.info("standby_created", standby=n, data_dir=str(folder))
    prune_dead_holders(folder)
    return embedded.start(folder)
