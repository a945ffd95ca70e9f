"""`lakehouse up --ha N`: etcd and the Patroni nodes as supervised children.

They run under their own Supervisor (restarted when they die, as the daemons are),
started before the daemons and stopped after them: Patroni stops its PostgreSQL on
SIGTERM, and etcd goes last so that Patroni can still let go of the leader key.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import structlog

from internal.common import waits
from internal.config import Config
from internal.ha import conf, patroni
from internal.stack import cluster
from internal.stack.supervisor import Supervisor

log = structlog.get_logger()


def prepare(cfg: Config, nodes: int) -> cluster.Cluster:
    """The cluster `[ha]` describes, with `nodes` Patroni nodes."""
    return cluster.prepare(Path(cfg.ha.data_dir), nodes, n_etcd=cfg.ha.etcd_members,
                           scope=cfg.ha.scope, synchronous=cfg.ha.synchronous,
                           timing=conf.Timing())


async def wait_leader(urls: list[str], timeout: float, stopping: asyncio.Event,
                      synchronous: bool) -> patroni.Member | None:
    """Poll Patroni until a leader runs (and, in synchronous mode, a sync standby)."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline and not stopping.is_set():
            nodes = await patroni.cluster(session, urls)
            lead = patroni.leader(nodes or [])
            if lead is not None and (not synchronous or any(
                    m.role == "sync_standby" and m.state == "streaming" for m in nodes or [])):
                return lead
            await waits.event(stopping, 0.25)
    return None


async def start(c: cluster.Cluster, log_dir: Path | None, stopping: asyncio.Event,
                timeout: float, synchronous: bool) -> tuple[Supervisor, patroni.Member | None]:
    """Run etcd and every node; the supervisor and the leader (None: not in time)."""
    sup = Supervisor(list(c.specs), log_dir=log_dir)
    sup.stopping = stopping
    await sup.start()
    pending = await sup.wait_ready(timeout)
    if pending:
        log.error("ha_not_ready", pending=pending)
        return sup, None
    lead = await wait_leader(c.patroni_urls, timeout, stopping, synchronous)
    log.info("ha_cluster_ready", leader=lead.name if lead else None,
             nodes=[n.name for n in c.nodes])
    return sup, lead


async def stop(sup: Supervisor) -> None:
    """Stop the nodes, then etcd (Supervisor.stop goes in reverse start order)."""
    await sup.stop(grace=30.0)
