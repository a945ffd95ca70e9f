"""vectord as a real process: readiness, and no acknowledged write lost across SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp

from internal.common.daemon import EXIT_CONFIG
from tests.helpers import ROOT
from tests.vectord.vdata import call, item, unique

C = "/v1/vectors/corpora"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def vectord_process(dsn: str, port: int) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "LAKEHOUSE_PG_DSN": dsn, "LAKEHOUSE_VECTORD_PORT": str(port),
           "LAKEHOUSE_LOG_FORMAT": "json", "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml")}
    proc = subprocess.Popen([sys.executable, "-m", "internal.vectord.server"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


async def wait_up(http: aiohttp.ClientSession, base: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        assert proc.poll() is None, f"vectord exited with {proc.returncode}"
        try:
            async with http.get(f"{base}/readyz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("vectord did not become ready in 30 s")


async def test_restart_keeps_acknowledged_items(pg_dsn: str, http: aiohttp.ClientSession) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    name = unique("restart")
    acked: set[str] = set()
    with vectord_process(pg_dsn, port) as proc:
        await wait_up(http, base, proc)
        _, ready = await call(http, "GET", f"{base}/readyz")
        assert ready["status"] == "ok" and ready["components"]["postgres"]["status"] == "ok"
        status, _ = await call(http, "POST", f"{base}{C}", {"name": name, "dim": 8})
        assert status == 201
        for batch in range(5):
            items = [item(batch * 100 + i, 8) for i in range(100)]
            status, body = await call(http, "POST", f"{base}{C}/{name}/items", {"items": items})
            assert status == 200 and body["upserted"] == 100
            acked |= {it["id"] for it in items}
        # Killed without warning: no clean shutdown, no flush.
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    with vectord_process(pg_dsn, port) as proc:
        await wait_up(http, base, proc)
        _, corpus = await call(http, "GET", f"{base}{C}/{name}")
        assert corpus["count"] == len(acked)
        _, body = await call(http, "GET", f"{base}{C}/{name}/ids?limit=10000")
        assert {row["id"] for row in body["items"]} == acked
        status, got = await call(http, "GET", f"{base}{C}/{name}/items/doc-0042")
        assert status == 200 and got["text"] == "document number 42"
        await call(http, "DELETE", f"{base}{C}/{name}")


def test_bad_config_exits_naming_key(pg_dsn: str) -> None:
    env = {**os.environ, "LAKEHOUSE_PG_DSN": pg_dsn, "LAKEHOUSE_VECTORD_POOL_MAX": "ten",
           "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml")}
    out = subprocess.run([sys.executable, "-m", "internal.vectord.server"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == EXIT_CONFIG  # `lakehouse up` does not restart it
    assert "vectord.pool_max" in out.stderr and "ten" in out.stderr
