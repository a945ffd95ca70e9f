"""A failover drill: writers and searchers against a stack while a node is made to fail.

Used by the HA tests and bench/suite/failover.py alike. Writers upsert one item a
request and remember every id answered 2xx; searchers run vector searches. A case's
timeline is measured from the fault: the new leader named by Patroni, the first write
acknowledged after the writes stopped, the old node streaming again as a replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import psycopg
from psycopg import sql

from internal.ha import patroni
from internal.stack import cluster

C = "/v1/vectors/corpora"
DIM = 4
Fault = Callable[[patroni.Member], Awaitable[None]]  # done to the leader of the moment


@dataclass
class Load:
    """4 writers and 8 searchers (by default) on one corpus through the gateway."""

    url: str
    corpus: str
    writers: int = 4
    searchers: int = 8
    timeout: float = 10.0
    acked: list[tuple[float, str]] = field(default_factory=list)  # (time acknowledged, id)
    write_failures: list[float] = field(default_factory=list)
    searches: list[tuple[float, bool]] = field(default_factory=list)  # (time, ok)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _n: int = 0

    async def create(self, http: aiohttp.ClientSession) -> None:
        async with http.post(f"{self.url}{C}", json={"name": self.corpus, "dim": DIM,
                                                     "language": "english"}) as resp:
            if resp.status not in (200, 201, 409):
                raise AssertionError(f"create {self.corpus}: {resp.status} {await resp.text()}")

    async def _write(self, http: aiohttp.ClientSession, w: int) -> None:
        while not self._stop.is_set():
            self._n += 1
            item_id = f"w{w}-{self._n}"
            body = {"items": [{"id": item_id, "vector": [1.0, float(w), 0.0, float(self._n)],
                               "text": f"drill item {item_id}"}]}
            try:
                async with http.post(f"{self.url}{C}/{self.corpus}/items", json=body,
                                     timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                    await resp.read()
                    ok = 200 <= resp.status < 300
            except (aiohttp.ClientError, asyncio.TimeoutError):
                ok = False
            now = time.monotonic()
            if ok:
                self.acked.append((now, item_id))
            else:
                self.write_failures.append(now)
                await asyncio.sleep(0.05)

    async def _search(self, http: aiohttp.ClientSession, s: int) -> None:
        body = {"mode": "vector", "query_vector": [1.0, float(s % 4), 0.0, 1.0], "k": 5}
        while not self._stop.is_set():
            try:
                async with http.post(f"{self.url}{C}/{self.corpus}/search", json=body,
                                     timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                    await resp.read()
                    ok = resp.status == 200
            except (aiohttp.ClientError, asyncio.TimeoutError):
                ok = False
            self.searches.append((time.monotonic(), ok))
            await asyncio.sleep(0.02 if ok else 0.05)

    def start(self, http: aiohttp.ClientSession) -> None:
        self._stop.clear()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._write(http, w)) for w in range(self.writers)]
        self._tasks += [loop.create_task(self._search(http, s)) for s in range(self.searchers)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass
class Timeline:
    case: str
    old_leader: str
    new_leader: str | None
    elected: float | None  # seconds after the fault that Patroni named another leader
    writes_back: float  # first write acknowledged after the last failed one (0: none failed)
    old_back: float | None  # the old node streaming as a replica again
    write_gap: float  # the longest time without an acknowledged write around the fault
    acked: int
    write_failures: int
    searches: int
    searches_failed_during: int
    searches_failed_outside: int

    def row(self) -> dict[str, Any]:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in vars(self).items()}


async def cluster_now(http: aiohttp.ClientSession,
                      urls: Sequence[str]) -> list[patroni.Member]:
    return await patroni.cluster(http, urls, timeout=1.0) or []


async def run_case(case: str, load: Load, http: aiohttp.ClientSession, urls: Sequence[str],
                   fault: Fault, *,
                   expect_new_leader: bool = True, settle: float = 3.0,
                   limit: float = 90.0, min_acked: int = 101) -> Timeline:
    """Inject `fault` into the current leader under load and time what follows."""
    nodes = await cluster_now(http, urls)
    old = patroni.leader(nodes)
    if old is None:
        raise AssertionError(f"no leader before {case}: {nodes}")
    acked_before = len(load.acked)
    failures_before = len(load.write_failures)
    searches_before = len(load.searches)
    await asyncio.sleep(1.0)
    t0 = time.monotonic()
    await fault(old)
    elected: float | None = None
    old_back: float | None = None
    while time.monotonic() - t0 < limit:
        nodes = await cluster_now(http, urls)
        now = time.monotonic() - t0
        lead = patroni.leader(nodes)
        if elected is None and lead is not None and lead.name != old.name:
            elected = now
        me = next((m for m in nodes if m.name == old.name), None)
        leader_ok = lead is not None and (lead.name != old.name or not expect_new_leader)
        if (old_back is None and me is not None and leader_ok and me.role != patroni.LEADER
                and me.state == "streaming" and lead is not None
                and me.timeline == lead.timeline):
            old_back = now
        if not expect_new_leader and old_back is None and lead is not None \
                and lead.name == old.name and now > settle:
            old_back = 0.0  # nothing to rejoin: the leader stayed
        writes_ok = any(t > t0 + 0.5 for t, _ in load.acked[acked_before:]) and (
            not load.write_failures[failures_before:]
            or any(t > load.write_failures[-1] for t, _ in load.acked[acked_before:]))
        if old_back is not None and writes_ok and (elected is not None or not expect_new_leader):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(settle)
    # Enough acknowledged writes to prove something on a loaded machine (the suite runs on
    # three workers): the load runs on until the case holds min_acked of them.
    for _ in range(int(limit / 0.2)):
        if len(load.acked) - acked_before >= min_acked or time.monotonic() - t0 >= limit:
            break
        await asyncio.sleep(0.2)
    fails = [t for t in load.write_failures[failures_before:] if t >= t0]
    acks = [t for t, _ in load.acked[acked_before:]]
    last_fail = max(fails) if fails else None
    writes_back = 0.0
    if last_fail is not None:
        after = [t for t in acks if t > last_fail]
        writes_back = (min(after) - t0) if after else float("inf")
    marks = sorted([t0, *[t for t in acks if t >= t0 - 1.0]])
    gap = max((b - a for a, b in itertools.pairwise(marks)), default=0.0)
    window_end = t0 + max(writes_back, elected or 0.0) + 1.0
    during = [ok for t, ok in load.searches[searches_before:] if t0 <= t <= window_end]
    outside = [ok for t, ok in load.searches[searches_before:] if not t0 <= t <= window_end]
    final = patroni.leader(await cluster_now(http, urls))
    return Timeline(case, old.name, final.name if final else None, elected, writes_back, old_back, gap, len(acks), len(fails),
        len(load.searches) - searches_before, during.count(False), outside.count(False))


async def missing_on(dsn: str, corpus: str, ids: Sequence[str]) -> list[str]:
    """The ids of `ids` not found in the corpus's table on one node (read directly)."""
    from internal.vectord.tables import items_table

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                     connect_timeout=5) as conn:
        cur = await conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (corpus,))
        row = await cur.fetchone()
        if row is None:
            return list(ids)
        cur = await conn.execute(sql.SQL("SELECT id FROM {} WHERE id = ANY(%s)").format(
            items_table(int(row[0]))), (list(ids),))
        found = {r[0] for r in await cur.fetchall()}
    return [i for i in ids if i not in found]


async def wait_replayed(dsns: Sequence[str], seconds: float = 30.0) -> None:
    """Until every node has replayed what the leader had written when asked."""
    deadline = time.monotonic() + seconds
    target: int | None = None
    for dsn in dsns:
        with contextlib.suppress(psycopg.Error):
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                             connect_timeout=3) as conn:
                cur = await conn.execute("SELECT pg_is_in_recovery(), "
                                         "pg_current_wal_lsn() - '0/0'::pg_lsn")
                row = await cur.fetchone()
                if row is not None and not row[0]:
                    target = int(row[1])
    if target is None:
        return
    for dsn in dsns:
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                async with await psycopg.AsyncConnection.connect(
                        dsn, autocommit=True, connect_timeout=3) as conn:
                    cur = await conn.execute(
                        "SELECT coalesce(pg_last_wal_replay_lsn(), pg_current_wal_lsn())"
                        " - '0/0'::pg_lsn")
                    row = await cur.fetchone()
                    if row is not None and int(row[0]) >= target:
                        break
            await asyncio.sleep(0.2)


# --- faults: what happens to a node on a real machine, done to the local cluster --------

def patroni_process(folder: Path, name: str) -> psutil.Process:
    """The Patroni process of node `name` of the local cluster in folder."""
    conf = str(folder / f"{name}.yml")
    for p in psutil.process_iter(["cmdline"]):
        if p.info["cmdline"] and p.info["cmdline"][-1] == conf and "patroni" in p.info["cmdline"]:
            return p
    raise AssertionError(f"no Patroni process for {name}")


def postmaster(folder: Path, name: str) -> psutil.Process:
    pid = cluster.postmaster_pid(folder / name)
    if pid is None:
        raise AssertionError(f"no postmaster for {name}")
    return psutil.Process(pid)


def kill_postmaster(folder: Path) -> Fault:
    """SIGKILL of the leader's postmaster (PostgreSQL crashes; its machine lives)."""
    async def fault(m: patroni.Member) -> None:
        postmaster(folder, m.name).send_signal(signal.SIGKILL)
    return fault


def kill_patroni(folder: Path) -> Fault:
    """SIGKILL of the leader's Patroni (PostgreSQL runs on; the supervisor restarts it)."""
    async def fault(m: patroni.Member) -> None:
        patroni_process(folder, m.name).send_signal(signal.SIGKILL)
    return fault


def freeze(folder: Path, seconds: float) -> Fault:
    """SIGSTOP of the leader's Patroni, postmaster and backends (a hung machine), then
    SIGCONT after `seconds` (in the background)."""
    async def fault(m: patroni.Member) -> None:
        pm = postmaster(folder, m.name)
        procs = [patroni_process(folder, m.name), pm, *pm.children()]
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.suspend()

        async def thaw() -> None:
            await asyncio.sleep(seconds)
            for p in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.resume()
        _thaws.append(asyncio.get_running_loop().create_task(thaw()))
    return fault


def switchover(urls: Sequence[str]) -> Fault:
    """A planned switchover through Patroni's API (Patroni picks the sync standby)."""
    async def fault(m: patroni.Member) -> None:
        async with aiohttp.ClientSession() as http:
            status, text = await patroni.post(http, m.api_url or urls[0], "/switchover",
                                              {"leader": m.name})
        if status != 200:
            raise AssertionError(f"switchover: {status} {text}")
    return fault


_thaws: list[asyncio.Task[None]] = []  # kept so that the SIGCONT task is not collected
