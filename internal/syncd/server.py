"""syncd: keeps a corpus equal to a directory of markdown pages, on a ticker and on demand.

Its own daemon (not matrixd) so a slow or crashing sync never takes query serving
down; it needs only embedd and vectord. See docs/decisions/0096-syncd.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import msgspec
import structlog
from aiohttp import web

from internal.api.responses import SyncRun, SyncStatus
from internal.clients.base import ServiceClient
from internal.clients.embed import EmbedClient
from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.common import access, language
from internal.common.access import decide
from internal.common.auth import as_service, caller, protect, service_headers
from internal.common.daemon import serve
from internal.common.errors import Forbidden, InvalidArgument, LakehouseError, Unavailable
from internal.common.web import json_response, make_base_app
from internal.config import Config, ConfigError, SyncConfig
from internal.syncd.runner import RunResult, Syncer, SyncSettings
from internal.syncd.ticker import Ticker

log = structlog.get_logger()


class SyncState:
    """What a configured syncd holds: the syncer, its ticker and the ticker's task."""

    def __init__(self, syncer: Syncer, ticker: Ticker, health: list[ServiceClient]) -> None:
        self.syncer = syncer
        self.ticker = ticker
        self.health = health


STATE = web.AppKey("sync_state", SyncState)
SESSION = web.AppKey("session", aiohttp.ClientSession)


def settings_of(cfg: SyncConfig) -> SyncSettings:
    return SyncSettings(wiki_dir=Path(cfg.wiki_dir), corpus=cfg.corpus, ignore=cfg.ignore,
                        languages=dict(cfg.languages), batch_size=cfg.batch_size,
                        chunk_chars=cfg.chunk_chars, normalize=cfg.normalize)


def check_config(cfg: SyncConfig) -> None:
    """Start-up checks that need the file system (the loader checked the rest)."""
    if not cfg.wiki_dir:
        return
    if not Path(cfg.wiki_dir).is_dir():
        raise ConfigError("sync.wiki_dir", f"{cfg.wiki_dir!r} does not exist or is not a directory")
    if not cfg.embedd_url:
        raise ConfigError("sync.embedd_url", "sync needs an embedding backend")
    for folder, code in cfg.languages.items():
        try:
            language.normalize_language(code, f"sync.languages.{folder}")
        except InvalidArgument as exc:
            raise ConfigError(f"sync.languages.{folder}",
                              f"unknown language {code!r} (an ISO 639-1 code or a PostgreSQL "
                              "text search configuration; 'simple' for none)") from exc


def _state(request: web.Request) -> SyncState:
    state = request.app.get(STATE)
    if state is None:
        raise Unavailable("sync is off: [sync] wiki_dir is not set", code="sync_not_configured")
    return state


def _answer(result: RunResult) -> SyncRun:
    """A run's result as its wire struct (the timestamps read as UTC datetimes)."""
    return msgspec.convert(result, SyncRun, from_attributes=True, strict=False)


async def run_handler(request: web.Request) -> web.Response:
    state = _state(request)
    _allowed(state, "write", "running the wiki sync")
    with as_service():  # the caller may write the wiki corpus; the run is the stack's
        result = await state.syncer.request_run()
    return json_response(_answer(result))


def _allowed(state: SyncState, action: str, doing: str) -> None:
    """The caller's scope must hold the synced corpus (a 403 that does not name it), then
    the action."""
    scope = caller()
    if scope is not None and not scope.sees(state.syncer.settings.corpus):
        raise Forbidden(f"{doing}: the synced corpus is outside this key")
    decide(scope or access.SERVICE, action, doing=doing)


async def status_handler(request: web.Request) -> web.Response:
    state = _state(request)
    _allowed(state, "read", "reading the wiki sync's status")
    s = state.syncer
    last = _answer(s.last) if s.last is not None else None
    return json_response(SyncStatus(
        wiki_dir=str(s.settings.wiki_dir), corpus=s.settings.corpus,
        interval=state.ticker.interval, running=s.running, runs=s.runs, last_run=last,
        last_run_at=last.started_at if last else None,
        last_finished_at=last.finished_at if last else None,
        next_run_at=datetime.fromtimestamp(state.ticker.next_run_at, UTC).replace(
            microsecond=0)))


async def health(clients: list[ServiceClient]) -> dict[str, str]:
    """Each daemon a run needs: "ok", or why it does not answer."""
    components: dict[str, str] = {}
    for client in clients:
        try:
            await client.call("GET", "/healthz", timeout=2.0)
            components[client.service] = "ok"
        except LakehouseError as exc:
            components[client.service] = exc.message
    return components


async def readyz(request: web.Request) -> web.Response:
    state = request.app.get(STATE)
    if state is None:
        return json_response({"status": "ok", "components": {"sync": "not_configured"}})
    components = await health(state.health)
    ok = all(v == "ok" for v in components.values())
    return json_response({"status": "ok" if ok else "degraded", "components": components},
                         status=200 if ok else 503)


def make_app(cfg: Config) -> web.Application:
    """The syncd app; raises ConfigError when wiki_dir is set but unusable."""
    check_config(cfg.sync)
    app = make_base_app()
    protect(app, cfg)
    app.router.add_get("/readyz", readyz)
    app.router.add_post("/v1/sync/run", run_handler)
    app.router.add_get("/v1/sync/status", status_handler)
    if not cfg.sync.wiki_dir:
        # Sync off is the default (no wiki_dir), not a warning for the terminal.
        log.info("sync_not_configured", reason="[sync] wiki_dir is not set")
        return app

    async def resources(app: web.Application) -> AsyncIterator[None]:
        async with aiohttp.ClientSession(headers=service_headers(cfg)) as session:
            app[SESSION] = session
            vectord = VectordClient(session, cfg.sync.vectord_url)
            embed = EmbedClient(session, cfg.sync.embedd_url)
            needed: list[ServiceClient] = [vectord, embed]
            matrixd = None
            if cfg.sync.normalize:
                matrixd = MatrixdClient(session, cfg.sync.matrixd_url, timeout=300.0)
                needed.append(matrixd)
            syncer = Syncer(settings_of(cfg.sync), vectord, embed, matrixd)

            async def missing() -> list[str]:
                return [name for name, said in (await health(needed)).items() if said != "ok"]

            ticker = Ticker(syncer, cfg.sync.interval, cfg.sync.run_on_start, probe=missing)
            app[STATE] = SyncState(syncer, ticker, needed)
            task = asyncio.create_task(ticker.loop(), name="sync-ticker")
            try:
                yield
            finally:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass

    app.cleanup_ctx.append(resources)
    return app


def main() -> int:
    return serve("syncd", make_app, "sync")


if __name__ == "__main__":
    raise SystemExit(main())
