"""A local PostgreSQL backend's OS priority lowered while it writes for a bulk job.

Searches come first at every queue (interactive before bulk): on a small machine an
upsert's backend (the items' HNSW insert, the lexical triggers) takes a core from the
searches' backends. While a connection is lent to a write, its backend process runs at
`nice` more; it is set back when the connection returns to the pool, so a search that
takes the same connection later runs at the server's own priority.

Only for a server reached over a Unix socket (its backends are processes of this
machine), and only where this process may lower a priority *and* raise it back (root,
or CAP_SYS_NICE): an unprivileged process can lower one but never raise it again, and a
backend left low would later slow a search. `able()` checks that once, on a thread of
its own; without it, or for a server elsewhere, nothing is changed.
"""

from __future__ import annotations

import os
import sys
import threading

import psutil
import structlog

log = structlog.get_logger()


def able() -> bool:
    """Whether this process may lower a priority and raise it back (tried on a thread of
    its own, so a refusal leaves no thread of the process lowered)."""
    if sys.platform != "linux" or not hasattr(os, "setpriority"):
        return False
    result: list[bool] = []

    def probe() -> None:
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, now + 1))
            os.setpriority(os.PRIO_PROCESS, tid, now)
        except OSError:
            result.append(False)
            return
        result.append(True)

    t = threading.Thread(target=probe, name="nice-probe")
    t.start()
    t.join()
    return bool(result and result[0])


class BackendNice:
    """Lowers and restores the priority of a local server's backends (by pid)."""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.on = nice > 0 and able()
        self._known: dict[int, bool] = {}  # pid -> a PostgreSQL backend of this machine

    def _backend(self, pid: int) -> bool:
        """Whether pid is a PostgreSQL backend here (its process title says so)."""
        known = self._known.get(pid)
        if known is None:
            try:
                cmd = psutil.Process(pid).cmdline()
                known = bool(cmd) and cmd[0].startswith("postgres: ")
            except psutil.Error:
                known = False
            if len(self._known) > 1024:
                self._known.clear()
            self._known[pid] = known
        return known

    def lower(self, host: str, pid: int) -> bool:
        """The backend `pid` of a connection to `host` at `nice`; True when it was changed
        (restore it with `restore`). Only over a Unix socket (host a directory): a
        server of this machine, whose backend pids are processes here."""
        if not self.on or not host.startswith("/") or not self._backend(pid):
            return False
        try:
            os.setpriority(os.PRIO_PROCESS, pid, self.nice)
        except OSError as exc:
            log.warning("backend_nice_failed", pid=pid, error=str(exc))
            return False
        return True

    def restore(self, pid: int) -> bool:
        """The backend back at the server's own priority (0); False when it could not be
        (the caller then closes the connection rather than lend it to a search)."""
        try:
            os.setpriority(os.PRIO_PROCESS, pid, 0)
        except ProcessLookupError:
            return True  # the backend ended (the connection is gone with it)
        except OSError as exc:  # not after able(): said, and no backend lowered again
            log.error("backend_nice_restore_failed", pid=pid, error=str(exc))
            self.on = False
            return False
        return True
