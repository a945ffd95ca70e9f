"""Patroni's REST API as Lakehouse reads it: who leads, who follows, how far behind.

`GET /cluster` on any node answers for the whole cluster (from etcd). A node that
hangs (SIGSTOP, a frozen machine) must not hold the answer up, so every node is asked
at once with a short timeout and the first good answer wins.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

LEADER = "leader"
ROLES = ("leader", "replica", "sync_standby")


@dataclass(frozen=True)
class Member:
    name: str
    role: str  # leader | replica | sync_standby (Patroni's standby_leader etc. kept as is)
    state: str  # running | streaming | stopped | starting | ...
    host: str
    port: int
    timeline: int | None
    lag: int | None  # bytes behind the leader (None: the leader, or unknown)
    api_url: str

    def as_dict(self, pid: int | None = None) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "state": self.state, "lag": self.lag,
                "timeline": self.timeline, "pid": pid, "host": self.host, "port": self.port,
                "api_url": self.api_url}


def members(body: Any) -> list[Member]:
    """The members of a /cluster answer, in name order (unknown fields ignored)."""
    out: list[Member] = []
    for m in (body or {}).get("members", []) if isinstance(body, dict) else []:
        if not isinstance(m, dict) or "name" not in m:
            continue
        lag = m.get("lag")
        role = str(m.get("role", ""))
        if role == "master":  # Patroni before 3.0
            role = LEADER
        out.append(Member(
            name=str(m["name"]), role=role, state=str(m.get("state", "")),
            host=str(m.get("host", "")), port=int(m.get("port") or 0),
            timeline=int(m["timeline"]) if isinstance(m.get("timeline"), int) else None,
            lag=int(lag) if isinstance(lag, int) else None,
            api_url=str(m.get("api_url", "")).removesuffix("/patroni")))
    return sorted(out, key=lambda x: x.name)


def leader(nodes: Sequence[Member]) -> Member | None:
    """The running leader, if there is one."""
    for m in nodes:
        if m.role == LEADER and m.state == "running":
            return m
    return None


async def _one(session: aiohttp.ClientSession, url: str, path: str) -> Any:
    async with session.get(url.rstrip("/") + path) as resp:
        resp.raise_for_status()
        return await resp.json()


async def cluster(session: aiohttp.ClientSession, urls: Sequence[str],
                  timeout: float = 1.0) -> list[Member] | None:
    """The cluster as the first node to answer tells it; None when none answers."""
    tasks = [asyncio.ensure_future(asyncio.wait_for(_one(session, u, "/cluster"), timeout))
             for u in urls]
    try:
        for fut in asyncio.as_completed(tasks):
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                body = await fut
                found = members(body)
                if found:
                    return found
        return None
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def post(session: aiohttp.ClientSession, url: str, path: str,
               body: dict[str, Any], timeout: float = 30.0) -> tuple[int, str]:
    """POST to one node's API; its status and text."""
    async with session.post(url.rstrip("/") + path, json=body,
                            timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        return resp.status, await resp.text()
