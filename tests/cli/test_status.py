"""`lakehouse status` with no gateway at the configured address asks each daemon where
the config says it is, through the public client: a running vectord is ok, the others
unavailable, exit 1. With --url it reports that stack only."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from urllib.parse import urlsplit

from tests.helpers import ROOT


async def test_status_without_a_gateway_asks_each_daemon(vectord_url: str) -> None:
    port = urlsplit(vectord_url).port
    env = {**os.environ, "LAKEHOUSE_VECTORD_PORT": str(port), "LAKEHOUSE_TOKEN": "",
           "LAKEHOUSE_GATEWAY_PORT": "9"}
    env.pop("LAKEHOUSE_URL", None)
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "internal.cli.main", "status"], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=60)
    rows = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()
            if len(line.split()) >= 2}
    assert rows["gateway"] == "unreachable", out.stdout
    assert rows["vectord"] == "ok", out.stdout
    assert rows["embedd"] == "unavailable", out.stdout
    assert out.stdout.strip().endswith("not ready") and out.returncode == 1


async def test_status_with_a_url_reports_that_stack_only(vectord_url: str) -> None:
    port = urlsplit(vectord_url).port
    env = {**os.environ, "LAKEHOUSE_VECTORD_PORT": str(port), "LAKEHOUSE_TOKEN": ""}
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "internal.cli.main", "status", "--url",
                         "http://127.0.0.1:9"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=60)
    assert out.stdout.splitlines() == ["gateway  unreachable  http://127.0.0.1:9", "not ready"]
    assert out.returncode == 1
