"""Faults under load against `lakehouse up` with its own PostgreSQL.

kill -9 of the postmaster while searches and writes run: the requests in the outage are
503 postgres_unavailable (never a 500, never a dropped connection), the supervisor
restarts PostgreSQL, vectord's pool recovers by itself (no daemon is restarted), searches
succeed again within 10 s of the kill, and every write that was acknowledged is stored.
Then one SIGTERM under load stops every process of the stack, PostgreSQL included.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
import uuid
from collections.abc import Iterator

import aiohttp
import pytest

from internal.stack.postgres import postmaster_pid
from tests.stack import load, upstack

DIM = 8
DAEMONS = ("embedd", "vectord", "matrixd", "syncd", "gateway")


@pytest.fixture(scope="module")
def stack() -> Iterator[upstack.Stack]:
    # --verbose: the stack's own info events (signal_received, postgres_restarted) are
    # asserted on below; without it the terminal shows warnings and errors only.
    s = upstack.start("lakehouse-faults-test-", args=("--verbose",))
    yield s
    s.stop()
    shutil.rmtree(s.tmp, ignore_errors=True)


async def _corpus(base: str) -> str:
    name = f"faults_{uuid.uuid4().hex[:8]}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/v1/vectors/corpora", json={"name": name, "dim": DIM}) as r:
            assert r.status == 201, await r.text()
    return name


async def test_postmaster_killed_under_load_503_then_recovers(stack: upstack.Stack) -> None:
    base = stack.url
    corpus = await _corpus(base)
    pids = {d: stack.daemon_pid(d) for d in DAEMONS}
    pg = postmaster_pid(stack.tmp / "pg")
    assert pg is not None

    stop = asyncio.Event()
    live = load.Load()
    running = asyncio.ensure_future(load.run(base, corpus, DIM, stop, searchers=3, writers=3,
                                             timeout=20.0, load=live))
    # matrixd's searches too: vectord's 503 for every corpus stays a 503, not a 502.
    matrix = asyncio.ensure_future(load.run(base, corpus, DIM, stop, searchers=1, writers=0,
                                            search_url=f"{base}/v1/matrix/search",
                                            timeout=20.0, load=live))
    await asyncio.sleep(3.0)
    killed_at = time.monotonic()
    os.kill(pg, signal.SIGKILL)

    recovered_at: float | None = None
    deadline = killed_at + 60.0
    answers: list[load.Answer] = []
    while time.monotonic() < deadline and not running.done():
        await asyncio.sleep(0.2)
        answers = [a for a in live.answers if a.at >= killed_at]
        fails = [a for a in answers if a.status != 200]
        if fails and recovered_at is None:
            first_fail = min(a.at for a in fails)
            ok = [a.at for a in answers if a.kind == "search" and a.status == 200
                  and a.at - a.seconds >= first_fail]
            if ok:
                recovered_at = min(ok)
        if recovered_at is not None and time.monotonic() > recovered_at + 3.0:
            break
    stop.set()
    result = await running
    await matrix

    after_kill = [a for a in result.answers if a.at >= killed_at]
    failed = [a for a in after_kill if a.status != 200]
    assert failed, "no request failed while PostgreSQL was down"
    assert {(a.status, a.code) for a in failed} == {(503, "postgres_unavailable")}
    assert recovered_at is not None, "no search succeeded after PostgreSQL was killed"
    recovery = recovered_at - killed_at
    print(f"postmaster kill -> first successful search: {recovery:.2f} s; "
          f"{len(failed)} answers 503; slowest 503 {max(a.seconds for a in failed):.2f} s")
    assert recovery <= 10.0
    # Searches and writes after the recovery all succeed.
    late = [a for a in after_kill if a.at - a.seconds > recovered_at + 0.5]
    assert late and all(a.status == 200 for a in late)

    # No daemon was restarted: the pool recovered in place.
    assert {d: stack.daemon_pid(d) for d in DAEMONS} == pids
    assert '"postgres_restarted"' in stack.up_log()
    assert '"daemon_exited"' not in stack.up_log()
    new_pg = postmaster_pid(stack.tmp / "pg")
    assert new_pg is not None and new_pg != pg

    # Every acknowledged write is stored.
    assert result.acked
    stored = await load.stored_ids(base, corpus)
    assert result.acked - stored == set()


async def test_a_document_task_survives_postgres_killed(stack: upstack.Stack) -> None:
    """A task acknowledged (202) is in PostgreSQL: the postmaster killed while it runs, the
    task waits (its `error` says why), resumes once the server is back, and ends with every
    document in."""
    corpus = f"tasks_{uuid.uuid4().hex[:8]}"
    docs = [{"id": f"page-{i}", "text": f"# Page {i}\n\nNotes on ferry number {i}."}
            for i in range(600)]
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{stack.url}/v1/corpora/{corpus}/documents",
                             json={"documents": docs}) as r:
            assert r.status == 202, await r.text()
            task = await r.json()
        url = f"{stack.url}/v1/tasks/{task['id']}"

        async def now() -> dict[str, object]:
            async with http.get(url) as r:
                return dict(await r.json()) if r.status == 200 else {"state": f"http {r.status}"}

        for _ in range(2400):  # until it runs
            if (await now()).get("state") != "enqueued":
                break
            await asyncio.sleep(0.05)
        pg = postmaster_pid(stack.tmp / "pg")
        assert pg is not None
        os.kill(pg, signal.SIGKILL)
        deadline = time.monotonic() + 300
        done: dict[str, object] = {}
        while time.monotonic() < deadline:
            done = await now()
            if done.get("state") in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.2)
        assert done.get("state") == "succeeded", done
        async with http.get(f"{stack.url}/v1/vectors/corpora/{corpus}") as r:
            info = await r.json()
    assert (info["documents"], info["count"]) == (600, 600)


async def test_one_sigterm_under_load_stops_everything(stack: upstack.Stack) -> None:
    base = stack.url
    corpus = await _corpus(base)
    stop = asyncio.Event()
    running = asyncio.ensure_future(load.run(base, corpus, DIM, stop, searchers=4, writers=2,
                                             timeout=20.0))
    matrix = asyncio.ensure_future(load.run(base, corpus, DIM, stop, searchers=2, writers=0,
                                            search_url=f"{base}/v1/matrix/search",
                                            timeout=20.0))
    await asyncio.sleep(3.0)
    family = stack.family()
    assert len(family) >= 6  # five daemons and the postmaster
    sent = time.monotonic()
    stack.proc.send_signal(signal.SIGTERM)
    gone_at: float | None = None
    while time.monotonic() < sent + 60:
        if not any(upstack.running(p) for p in family) and stack.proc.poll() is not None:
            gone_at = time.monotonic()
            break
        await asyncio.sleep(0.1)
    stop.set()
    for task in (running, matrix):
        (await task)
    left = [p for p in family if upstack.running(p)]
    assert left == []
    assert gone_at is not None
    print(f"one SIGTERM under load: every process gone after {gone_at - sent:.2f} s")
    for line in stack.up_log().splitlines():
        if any(e in line for e in ("signal_received", "stack_stopping", "daemons_stopped",
                                   "postgres_stopped", "daemon_stopping",
                                   "daemons_killed_after_grace")):
            print("  ", line[:160])
    for name in _stuck_daemons(stack.up_log()):
        print(f"  {name} did not stop within the grace; its log ends:")
        lines = (stack.logs / f"{name}.log").read_text().splitlines()
        for line in lines[-12:]:
            print("    ", line[:200])
        for line in lines:  # where it hung: the stacks it logged before its SIGKILL
            if '"task_stack"' in line or '"thread_stack"' in line:
                print("    ", json.loads(line[line.index("{"):]).get("stack", "")[-3000:])
    assert gone_at - sent <= 15.0
    assert stack.proc.returncode == 0
    log = stack.up_log()
    assert log.count('"signal_received"') == 1
    assert '"stack_stopping"' in log
    assert '"daemons_killed_after_grace"' not in log


def _stuck_daemons(up_log: str) -> list[str]:
    """The daemons the supervisor named as killed after its grace, if any."""
    for line in up_log.splitlines():
        if '"daemons_killed_after_grace"' in line:
            return list(json.loads(line[line.index("{"):]).get("daemons", []))
    return []
