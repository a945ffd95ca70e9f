"""syncd over HTTP: not configured, bad config at start-up, run and status."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from internal.api.responses import SyncRun, SyncStatus
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common import waits
from internal.common.daemon import EXIT_CONFIG
from internal.config import Config, ConfigError
from internal.syncd import send
from internal.syncd.server import make_app
from internal.syncd.ticker import Ticker
from internal.vectord.server import make_app as make_vectord
from tests.helpers import ROOT, serve, url_of, with_section
from tests.sync.conftest import LANGUAGES, LatePort, expected_pages, make_syncer, tiny_wiki
from tests.wire_drift import strictly


async def test_unconfigured_sync_answers_503(base_cfg: Config, http: aiohttp.ClientSession) -> None:
    server = await serve(make_app(with_section(base_cfg, "sync", wiki_dir="")))
    try:
        for method, path in (("POST", "/v1/sync/run"), ("GET", "/v1/sync/status")):
            async with http.request(method, url_of(server) + path) as resp:
                body = await resp.json()
                assert resp.status == 503
                assert body["error"]["code"] == "sync_not_configured"
        async with http.get(url_of(server) + "/healthz") as resp:
            assert resp.status == 200
    finally:
        await server.close()


def test_missing_wiki_dir_or_bad_language_is_a_config_error(base_cfg: Config, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sync\.wiki_dir"):
        make_app(with_section(base_cfg, "sync", wiki_dir=str(tmp_path / "nope")))
    with pytest.raises(ConfigError, match=r"sync\.languages\.pages\.xx"):
        make_app(with_section(base_cfg, "sync", wiki_dir=str(tmp_path),
                              languages={"pages.xx": "klingon"}))


@pytest.mark.parametrize("env, reason", [
    ({"LAKEHOUSE_SYNC_WIKI_DIR": "/nonexistent/wiki"}, "sync.wiki_dir"),
    ({"LAKEHOUSE_SYNC_WIKI_DIR": "/tmp", "LAKEHOUSE_SYNC_EMBEDD_URL": ""}, "sync.embedd_url"),
])
def test_daemon_exits_at_start_up_on_its_config(env: dict[str, str], reason: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "internal.syncd.server"], cwd=ROOT, capture_output=True,
        text=True, timeout=60, env={**os.environ, "LAKEHOUSE_SYNC_PORT": "0", **env})
    assert proc.returncode == EXIT_CONFIG
    assert proc.stderr.startswith(f"config error: {reason}: ") and not proc.stdout


async def test_run_and_status_over_http(
        base_cfg: Config, wiki: Path, corpus: str, http: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    cfg = with_section(base_cfg, "sync", wiki_dir=str(wiki), corpus=corpus,
                       vectord_url=documents_url, embedd_url=embedd_url, interval=3600.0,
                       run_on_start=False, languages=dict(LANGUAGES))
    server = await serve(make_app(cfg))
    base = url_of(server)
    try:
        # Each answer decodes strictly into its wire struct (the contract test's check).
        async with http.get(base + "/v1/sync/status") as resp:
            strictly(SyncStatus, await resp.read())
            status = await resp.json()
        assert resp.status == 200
        assert status["last_run"] is None and status["running"] is False
        assert status["next_run_at"] and status["corpus"] == corpus

        async with http.post(base + "/v1/sync/run") as resp:
            strictly(SyncRun, await resp.read())
            result = await resp.json()
        assert resp.status == 200
        assert {"added", "updated", "deleted", "unchanged", "errors", "seconds"} <= set(result)
        assert result["added"] == len(expected_pages(wiki)) and result["errors"] == []

        (wiki / "pages" / "common" / "7z.md").unlink()
        async with http.post(base + "/v1/sync/run") as resp:
            second = await resp.json()
        assert (second["deleted"], second["added"]) == (1, 0)

        async with http.get(base + "/v1/sync/status") as resp:
            done = strictly(SyncStatus, await resp.read())
            status = await resp.json()
        assert done.last_run is not None and done.last_run_at == done.last_run.started_at
        assert status["runs"] == 2 and status["last_run"]["deleted"] == 1
        assert status["last_run_at"] and status["last_finished_at"]
        async with http.get(base + "/readyz") as resp:
            assert resp.status == 200
            assert (await resp.json())["components"] == {"vectord": "ok", "embedd": "ok"}
    finally:
        await server.close()


async def test_ticker_runs_on_start_and_on_its_cadence(
        base_cfg: Config, tmp_path: Path, corpus: str, http: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    wiki = tmp_path / "tiny"
    wiki.mkdir()
    for name in ("alpha", "beta"):
        (wiki / f"{name}.md").write_text(f"# {name}\n\nThe {name} page of a tiny wiki.\n",
                                         encoding="utf-8")
    cfg = with_section(base_cfg, "sync", wiki_dir=str(wiki), corpus=corpus,
                       vectord_url=documents_url, embedd_url=embedd_url, interval=0.5,
                       run_on_start=True)
    server = await serve(make_app(cfg))
    try:
        status: dict[str, object] = {}
        for _ in range(600):  # the ticker, not a request, makes these runs
            async with http.get(url_of(server) + "/v1/sync/status") as resp:
                status = await resp.json()
            if int(str(status["runs"])) >= 2:
                break
            await asyncio.sleep(0.1)
        assert int(str(status["runs"])) >= 2
        last = status["last_run"]
        assert isinstance(last, dict) and last["unchanged"] == 2 and last["errors"] == []
    finally:
        await server.close()


async def _status_until(http: aiohttp.ClientSession, base: str, done: Callable[[SyncStatus], bool],
                        seconds: float) -> SyncStatus:
    """The sync status once `done` holds (or the last one after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        async with http.get(base + "/v1/sync/status") as resp:
            status = strictly(SyncStatus, await resp.read())
        if done(status) or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.1)


async def test_the_first_run_waits_for_a_late_embedd(
        base_cfg: Config, tmp_path: Path, corpus: str, http: aiohttp.ClientSession,
        documents_url: str, embedd_url: str) -> None:
    # As in `lakehouse up`: syncd is up before embedd has loaded its model. The first run
    # waits for it, then succeeds, long before the interval (an hour here) comes round.
    late = LatePort(embedd_url)
    cfg = with_section(base_cfg, "sync", wiki_dir=str(tiny_wiki(tmp_path / "tiny")),
                       corpus=corpus, vectord_url=documents_url, embedd_url=late.url,
                       interval=3600.0, run_on_start=True)
    server = await serve(make_app(cfg))
    base = url_of(server)
    try:
        await asyncio.sleep(2.0)
        early = await _status_until(http, base, lambda s: True, 0)
        assert early.runs == 0 and early.last_run is None  # no run failed meanwhile
        await late.open()
        status = await _status_until(http, base, lambda s: s.runs >= 1, 30)
        assert status.last_run is not None, "no run within 30 s of embedd coming up"
        assert status.last_run.errors == [] and status.last_run.added == 2
    finally:
        await server.close()
        await late.close()


async def test_a_run_the_stack_failed_goes_again_within_seconds(
        base_cfg: Config, tmp_path: Path, corpus: str, session: aiohttp.ClientSession,
        embedd_url: str, lone_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # No wait for the daemons (a run can fail at any time, e.g. embedd restarting): the
    # failed run is tried again after 1, 2, 4 ... seconds, not after the interval. embedd
    # is reached by the vectord that embeds the pages, through a port opened late.
    monkeypatch.setattr(send, "PATIENCE", 1.0)
    late = LatePort(embedd_url)
    vectord = await serve(make_vectord(with_section(base_cfg, "vectord", dsn=lone_dsn,
                                                    embedd_url=(late.url,), tasks=True)))
    syncer = make_syncer(tiny_wiki(tmp_path / "tiny"), corpus,
                         VectordClient(session, url_of(vectord)), EmbedClient(session, embedd_url))
    ticker = Ticker(syncer, interval=3600.0, run_on_start=True)
    task = asyncio.create_task(ticker.loop())
    try:
        for _ in range(600):
            if ticker.failures:
                break
            await asyncio.sleep(0.05)
        first = syncer.last
        assert first is not None and ticker.failures >= 1
        assert [e.path for e in first.errors] == ["."] and "embedd_unavailable" in first.errors[0].error
        assert first.transient
        assert ticker.next_run_at - time.time() < 60  # a retry, not the next hour
        await late.open()
        for _ in range(600):
            if syncer.last is not None and not syncer.last.errors:
                break
            await asyncio.sleep(0.1)
        assert syncer.last is not None and syncer.last.errors == []
        assert ticker.failures == 0 and ticker.next_run_at - time.time() > 3000
    finally:
        await waits.stop(task)
        await vectord.close()
        await late.close()
