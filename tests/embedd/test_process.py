"""embedd started as a real process, as a user runs it, and polled until it answers."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import aiohttp
import pytest

from tests.helpers import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def embedd_process() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {**os.environ, "LAKEHOUSE_EMBEDD_PORT": str(port), "LAKEHOUSE_LOG_FORMAT": "json",
           "LAKEHOUSE_EMBEDD_BACKEND": "local", "LAKEHOUSE_EMBEDD_BACKENDS": ""}
    proc = subprocess.Popen([sys.executable, "-m", "internal.embedd.server"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_process_serves_healthz_and_embeds(
        embedd_process: tuple[subprocess.Popen[bytes], str], http: aiohttp.ClientSession) -> None:
    proc, base = embedd_process
    for _ in range(600):
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
        try:
            async with http.get(f"{base}/healthz") as resp:
                if resp.status == 200:
                    break
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    else:
        pytest.fail("embedd did not answer /healthz within 60 s")
    async with http.post(f"{base}/v1/embed", json={"texts": ["hello"]}) as resp:
        assert resp.status == 200
        out = await resp.json()
    assert out["dim"] == 384 and len(out["vectors"][0]) == 384
    proc.terminate()
    assert proc.wait(timeout=20) == 0  # SIGTERM is a clean shutdown
