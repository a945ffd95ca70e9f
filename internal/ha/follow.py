"""vectord follows the Patroni leader: writes go to whichever node leads now.

The write pool's DSN names every node with target_session_attrs=read-write, so a new
connection always lands on a leader; what it cannot see alone is a leader that hangs
(SIGSTOP, a frozen machine): its connections neither fail nor answer. So a watch asks
Patroni's REST API every `interval` seconds who leads; when the leader changes, the
pool is pointed at the new one (its node first in the DSN) and swapped for a fresh
pool, which drops the hung connections with the old one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import aiohttp
import structlog
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from internal.ha import patroni
from internal.pg.resilient import ResilientPool

log = structlog.get_logger()


def leader_first(dsn: str, host: str, port: int) -> str:
    """The multi-host DSN with (host, port) moved to the front (added when absent), so
    libpq tries the known leader before nodes that may hang for connect_timeout."""
    parts = conninfo_to_dict(dsn)
    hosts = str(parts.get("host") or "").split(",") if parts.get("host") else []
    ports = str(parts.get("port") or "").split(",") if parts.get("port") else []
    if len(ports) == 1 and len(hosts) > 1:
        ports = ports * len(hosts)
    pairs = [(host, str(port))] + [pr for pr in zip(hosts, ports, strict=False)
                                   if pr != (host, str(port))]
    parts["host"] = ",".join(h for h, _ in pairs)
    parts["port"] = ",".join(pt for _, pt in pairs)
    parts.setdefault("target_session_attrs", "read-write")
    return make_conninfo("", **parts)


class LeaderWatch:
    """Keeps `pool` on the cluster's leader; counts leader changes for /metrics."""

    def __init__(self, pool: ResilientPool, urls: Sequence[str], *,
                 interval: float = 0.25) -> None:
        self.pool = pool
        self.urls = list(urls)
        self.interval = interval
        self.leader: patroni.Member | None = None
        self.nodes: list[patroni.Member] = []
        self.changes = 0
        self.answered = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=max(0.5, 2 * self.interval))
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    await self.check(session)
                except aiohttp.ClientError as exc:  # asked again on the next round
                    log.warning("patroni_check_failed", error=str(exc)[:200])
                await asyncio.sleep(self.interval)

    async def check(self, session: aiohttp.ClientSession) -> None:
        """Ask who leads; on a change, move the write pool there."""
        nodes = await patroni.cluster(session, self.urls, timeout=max(0.5, 2 * self.interval))
        self.answered = nodes is not None
        if nodes is None:
            return
        self.nodes = nodes
        now = patroni.leader(nodes)
        if now is None:
            return
        before = self.leader
        self.leader = now
        if before is None or (before.host, before.port) == (now.host, now.port):
            return
        self.changes += 1
        log.warning("leader_changed", leader=now.name, was=before.name,
                    timeline=now.timeline)
        self.pool.retarget(leader_first(self.pool.dsn, now.host, now.port),
                           reason=f"leader changed to {now.name}")

    def status(self) -> dict[str, Any]:
        """The cluster as last seen (/readyz, `lakehouse status`)."""
        return {"leader": self.leader.name if self.leader else None,
                "leader_changes": self.changes, "answered": self.answered,
                "nodes": [m.as_dict() for m in self.nodes]}
