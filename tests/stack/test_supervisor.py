"""The supervisor restarts a daemon that dies and leaves nothing behind when stopped."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import aiohttp
import psutil
import structlog.testing

from internal.config import Config
from internal.stack.plan import ChildSpec, plan
from internal.stack.supervisor import Backoff, Supervisor
from tests.stack.ports import free_port


def test_plan_wires_ports_and_upstreams() -> None:
    from tests.helpers import with_section

    cfg = with_section(with_section(Config(), "vectord", port=4012), "sync", port=4018)
    specs = {s.name: s for s in plan(cfg, "postgresql:///x?host=/tmp", "/etc/lh.toml")}
    assert list(specs) == ["embedd", "vectord", "matrixd", "syncd", "mcpd", "gateway"]
    env = specs["gateway"].env
    assert env["LAKEHOUSE_GATEWAY_VECTORD"] == "http://127.0.0.1:4012"
    assert env["LAKEHOUSE_SYNC_PORT"] == "4018"
    assert env["LAKEHOUSE_MATRIXD_VECTORD_URL"] == "http://127.0.0.1:4012"
    assert env["LAKEHOUSE_SYNC_VECTORD_URL"] == "http://127.0.0.1:4012"
    assert env["LAKEHOUSE_PG_DSN"] == "postgresql:///x?host=/tmp"
    assert env["LAKEHOUSE_CONFIG"] == "/etc/lh.toml"
    assert specs["syncd"].url == "http://127.0.0.1:4018"
    # mcpd's tools call the gateway, which serves mcpd at /mcp.
    assert env["LAKEHOUSE_MCPD_GATEWAY_URL"] == specs["gateway"].url
    assert env["LAKEHOUSE_GATEWAY_MCPD"] == specs["mcpd"].url
    # Every child sees the same wiring.
    assert all(s.env == env for s in specs.values())


def test_backoff_doubles_to_a_cap() -> None:
    b = Backoff(first=0.5, cap=4.0)
    assert [b.delay(n) for n in (1, 2, 3, 4, 5, 9)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def _fake(name: str, **env: str) -> ChildSpec:
    port = free_port()
    return ChildSpec(name, "tests.stack.fake_daemon", "127.0.0.1", port,
                     {"FAKE_PORT": str(port), **env})


async def test_supervisor_restarts_a_killed_daemon() -> None:
    sup = Supervisor([_fake("alpha"), _fake("beta")], backoff=Backoff(first=0.2))
    await sup.start()
    try:
        assert await sup.wait_ready(60) == []
        beta = sup.children["beta"]
        assert beta.proc is not None
        first_pid = beta.proc.pid
        os.kill(first_pid, signal.SIGKILL)
        for _ in range(200):
            if beta.restarts == 1:
                break
            await asyncio.sleep(0.05)
        assert beta.restarts == 1
        assert beta.proc.pid != first_pid
        assert beta.last_exit == -signal.SIGKILL
        assert await sup.wait_ready(60) == []  # serving again
        assert sup.children["alpha"].restarts == 0
    finally:
        await sup.stop()
    pids = set().union(*(c.pids for c in sup.children.values()))
    assert len(pids) == 3
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


async def test_a_daemon_that_hangs_on_stop_is_named_and_killed_after_the_grace() -> None:
    sup = Supervisor([_fake("alpha"), _fake("stuck", FAKE_HANG_ON_STOP="1")])
    await sup.start()
    try:
        assert await sup.wait_ready(60) == []
    finally:
        with structlog.testing.capture_logs() as logs:
            await sup.stop(grace=1.0)
    killed = [e for e in logs if e["event"] == "daemons_killed_after_grace"]
    assert [e["daemons"] for e in killed] == [["stuck"]]
    pids = set().union(*(c.pids for c in sup.children.values()))
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


async def test_a_config_error_is_said_once_not_restarted_and_served_by_a_stand_in(
        tmp_path: Path) -> None:
    """A daemon stopped on its configuration: one line naming the setting, no restart; a
    stand-in on its port answers every request with the reason; the gateway, whose only
    part not ready is that daemon, counts as up."""
    why = "sync.wiki_dir: '/srv/wiki' does not exist or is not a directory"
    syncd = _fake("syncd", FAKE_CONFIG_ERROR=why)
    gateway = _fake("gateway", FAKE_COMPONENTS=json.dumps(
        {"vectord": {"status": "ok"}, "syncd": {"status": "not_ready"}}))
    events: list[tuple[str, str]] = []
    sup = Supervisor([syncd, gateway], log_dir=tmp_path, backoff=Backoff(first=0.1),
                     on_event=lambda e, c: events.append((e, c.spec.name)))
    with structlog.testing.capture_logs() as logs:
        await sup.start()
        try:
            assert await sup.wait_ready(60) == []
            await asyncio.sleep(1.0)  # a restart would have come by now
            assert sup.failed() == {"syncd": f"config error: {why}"}
            assert sup.children["syncd"].restarts == 0
            assert ("failed", "syncd") in events and ("ready", "gateway") in events
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{syncd.url}/readyz") as r:
                    assert r.status == 503
                    assert (await r.json())["error"] == f"syncd is stopped: config error: {why}"
                async with http.get(f"{syncd.url}/v1/sync/status") as r:
                    body = await r.json()
                assert r.status == 503 and body["error"]["code"] == "config_error"
                assert why in body["error"]["message"]
        finally:
            await sup.stop()
    said = [e for e in logs if e.get("daemon") == "syncd" and e["log_level"] != "info"]
    assert [e["event"] for e in said] == ["daemon_config_error"]
