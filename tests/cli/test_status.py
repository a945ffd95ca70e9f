"""`lakehouse status` with no gateway at the configured address asks each daemon where
the config says it is, through the public client: a running vectord is ok, the others
unavailable, exit 1. With --url it reports that stack only."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from urllib.parse import urlsplit

from internal.api.responses import SyncError, SyncRun, SyncStatus
from internal.cli.stack_cmd import reembed_lines, sync_lines
from internal.config import Config
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


def test_the_sync_row_says_how_its_last_run_went() -> None:
    at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

    def status(errors: list[SyncError] | None, running: bool = False) -> SyncStatus:
        last = None if errors is None else SyncRun(
            added=1, updated=0, deleted=0, unchanged=2, errors=errors, seconds=0.5,
            finished_at=at)
        return SyncStatus(wiki_dir="/w", corpus="wiki", interval=300.0, running=running,
                          runs=0 if last is None else 1, last_run=last, next_run_at=at)

    assert sync_lines(None, off=True)[0] == ("sync", "off", "[sync] wiki_dir is not set")
    assert sync_lines(None) == (None, [])  # a key that may not see the synced corpus
    assert sync_lines(status(None))[0][1] == "waiting"  # type: ignore[index]
    row, notes = sync_lines(status([]))
    assert row == ("sync", "ok", "/w -> corpus wiki, last run 2026-11-27T12:00:00Z: added 1, "
                   "updated 0, deleted 0, unchanged 2, 0 errors; next 2026-11-27T12:00:00Z")
    assert notes == []
    row, notes = sync_lines(status([SyncError(path="a.md", error="cannot read: bad bytes")]))
    assert row is not None and row[1] == "errors"
    assert notes == ["sync error: a.md: cannot read: bad bytes"]
    row, notes = sync_lines(status([SyncError(path=".", error="embedd_unavailable: down")]))
    assert row is not None and row[1] == "failed"
    assert notes == ["sync error: embedd_unavailable: down"]


AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_a_row_per_corpus_being_re_embedded() -> None:
    """`lakehouse status` shows each re-embedding's progress (a superseded model's corpora
    move at start-up), and the last error of one that retries."""
    from internal.api.responses import Reembedding
    from lakehouse.types import Corpus

    def corpus(name: str, job: Reembedding | None) -> Corpus:
        return Corpus(name=name, dim=384, metric="cosine", language="english",
                      model="all-MiniLM-L6-v2", count=1000, created_at=AT, precision="float16",
                      reembed=job)

    rows, notes = reembed_lines([
        corpus("docs", Reembedding(model="all-MiniLM-L6-v2-int8", dim=384, done=250,
                                   total=1000)),
        corpus("quiet", None),
        corpus("wiki", Reembedding(model="all-MiniLM-L6-v2-int8", dim=384, done=0, total=0,
                                   error="embedd at http://127.0.0.1:8401: refused"))])
    assert rows == [
        ("reembed", "running", "corpus docs: all-MiniLM-L6-v2 -> all-MiniLM-L6-v2-int8, "
                               "250 of 1000 items (25%)"),
        ("reembed", "retrying", "corpus wiki: all-MiniLM-L6-v2 -> all-MiniLM-L6-v2-int8, "
                                "0 of 0 items")]
    assert notes == ["reembed error: wiki: embedd at http://127.0.0.1:8401: refused"]


async def test_status_names_a_part_stopped_on_its_configuration(
        base_cfg: Config, vectord_url: str, embedd_url: str) -> None:
    """A daemon stopped on its configuration (its stand-in on its port): `lakehouse status`
    shows it `stopped` and says why, in the line the daemon printed."""
    from internal.gateway.server import make_app
    from internal.stack import standin
    from tests.helpers import serve, url_of, with_section
    from tests.stack.ports import free_port

    port = free_port()
    why = "config error: sync.wiki_dir: '/srv/wiki' does not exist or is not a directory"
    runner = await standin.start("syncd", "127.0.0.1", port, why)
    gateway = await serve(make_app(with_section(
        base_cfg, "gateway", vectord=(vectord_url,), embedd=(embedd_url,),
        syncd=(f"http://127.0.0.1:{port}",), tokens=())))
    try:
        out = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "internal.cli.main", "status", "--url",
                             url_of(gateway)], cwd=ROOT, capture_output=True, text=True,
            timeout=60, env={**os.environ, "LAKEHOUSE_TOKEN": ""})
    finally:
        await gateway.close()
        await runner.cleanup()
    rows = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()
            if len(line.split()) >= 2}
    assert rows["syncd"] == "stopped" and rows["vectord"] == "ok", out.stdout
    assert f"syncd: syncd is stopped: {why}" in out.stdout.splitlines()
