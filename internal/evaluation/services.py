"""The daemons an evaluation talks to: the running ones, or vectord + embedd in-process.

A cold start needs nothing running: vectord's make_app opens the configured
PostgreSQL (the embedded server in `[vectord] data_dir` when no DSN is set), so the
ingested corpora persist there and a later eval reuses them; embedd's make_app loads
the local model. Both are served on free loopback ports and closed on the way out.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import structlog
from aiohttp import web

from internal.config import Config

log = structlog.get_logger()


@dataclass(frozen=True)
class Endpoints:
    vectord_url: str
    embedd_url: str
    started: tuple[str, ...]  # daemons started in-process for this run


async def _answers(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(f"{url.rstrip('/')}/readyz",
                               timeout=aiohttp.ClientTimeout(total=2)) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = int(runner.addresses[0][1])
    return runner, f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def services(cfg: Config, *, in_process: bool = False,
                   vectord_url: str | None = None, embedd_url: str | None = None
                   ) -> AsyncIterator[Endpoints]:
    """Use the given or configured daemons when they answer, else start them here."""
    vurl = vectord_url or cfg.gateway.vectord[0]
    eurl = embedd_url or cfg.gateway.embedd[0]
    runners: list[web.AppRunner] = []
    started: list[str] = []
    try:
        async with aiohttp.ClientSession() as session:
            use_v = not in_process and await _answers(session, vurl)
            use_e = not in_process and await _answers(session, eurl)
        if (vectord_url and not use_v) or (embedd_url and not use_e):
            raise RuntimeError(f"daemon not answering at {vectord_url if not use_v else embedd_url}")
        if not use_e:
            from internal.embedd.server import make_app as make_embedd

            runner, eurl = await _serve(make_embedd(cfg))
            runners.append(runner)
            started.append("embedd")
        if not use_v:
            from internal.vectord.server import make_app as make_vectord

            # vectord re-embeds (a superseded model's corpora too) through this embedd.
            vcfg = dataclasses.replace(cfg.vectord, embedd_url=(eurl,))
            runner, vurl = await _serve(make_vectord(dataclasses.replace(cfg, vectord=vcfg)))
            runners.append(runner)
            started.append("vectord")
        log.info("eval_services", vectord=vurl, embedd=eurl, started=started)
        yield Endpoints(vectord_url=vurl, embedd_url=eurl, started=tuple(started))
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
