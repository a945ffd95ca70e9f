"""embedd: turns text into vectors for every other daemon (POST /v1/embed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import msgspec
import structlog
from aiohttp import web

from internal.api.embedd import INTERACTIVE_PATH, LANE_HEADER, WAIT_HEADER, EmbedRequest
from internal.api.responses import EmbedResponse
from internal.common.auth import protect, service_token, token_ok
from internal.common.daemon import serve
from internal.common.errors import Unauthorized
from internal.common.web import json_response, make_base_app, read_json
from internal.config import Config
from internal.embedd.backends import Backend
from internal.embedd.coalesce import Lane
from internal.embedd.registry import open_backend
from internal.embedd.service import EmbedService

log = structlog.get_logger()

SERVICE = web.AppKey("embedd_service", EmbedService)


class ServiceOnly:
    """Whether an Authorization header carries the service token (always, auth off)."""

    def __init__(self, cfg: Config) -> None:
        token = service_token(cfg)
        self._tokens = [token.encode()] if token else []

    def __call__(self, header: str) -> bool:
        return not self._tokens or token_ok(header, self._tokens)


SERVICE_ONLY = web.AppKey("embedd_service_only", ServiceOnly)


async def _embed(request: web.Request, lane: Lane) -> web.Response:
    req = await read_json(request, EmbedRequest)
    out = await request.app[SERVICE].embed(req.texts, req.model, req.input_type or "document",
                                           lane)
    resp = json_response(EmbedResponse(model=out.model, dim=out.dim,
                                       vectors=out.vectors.tolist(), truncated=out.truncated))
    resp.headers[LANE_HEADER] = lane.value
    resp.headers[WAIT_HEADER] = f"{out.wait_s * 1000:.3f}"
    return resp


async def embed_handler(request: web.Request) -> web.Response:
    """Documents, and every text an outside client sends: the bulk lane."""
    return await _embed(request, Lane.BULK)


async def interactive_handler(request: web.Request) -> web.Response:
    """Questions of the daemons' search paths: the interactive lane."""
    if not request.app[SERVICE_ONLY](request.headers.get("Authorization", "")):
        raise Unauthorized(f"{INTERACTIVE_PATH} takes the service token only")
    return await _embed(request, Lane.INTERACTIVE)


async def lanes_handler(request: web.Request) -> web.Response:
    return json_response(request.app[SERVICE].lanes())


async def models_handler(request: web.Request) -> web.Response:
    return json_response(request.app[SERVICE].models())


async def readyz(request: web.Request) -> web.Response:
    service = request.app.get(SERVICE)
    if service is None:
        return json_response({"status": "degraded", "components": {"model": "loading"}}, 503)
    # Each model's lanes ride along: the gateway's /metrics reads them from here.
    return json_response({"status": "ok",
                          "components": {b.kind: "ok" for b in service.backends},
                          "lanes": service.lanes()["models"]})


def make_app(cfg: Config) -> web.Application:
    """The embedd app; backends open in a cleanup_ctx and close with the app."""
    ecfg = cfg.embedd
    app = make_base_app()
    protect(app, cfg)
    app[SERVICE_ONLY] = ServiceOnly(cfg)

    async def backends_ctx(app: web.Application) -> AsyncIterator[None]:
        session = aiohttp.ClientSession()
        backends: list[Backend] = []
        try:
            for kind in ecfg.enabled():
                backends.append(await open_backend(kind, ecfg, session))
            service = EmbedService(backends, ecfg.cache_size, ecfg.max_texts)
            app[SERVICE] = service
            log.info("embedd_ready", models=msgspec.to_builtins(service.models().models))
            yield
        finally:
            for b in backends:
                await b.close()
            await session.close()

    app.cleanup_ctx.append(backends_ctx)
    app.router.add_post("/v1/embed", embed_handler)
    app.router.add_post(INTERACTIVE_PATH, interactive_handler)
    app.router.add_get("/v1/embed/models", models_handler)
    app.router.add_get("/v1/embed/lanes", lanes_handler)
    app.router.add_get("/readyz", readyz)
    return app


def main() -> int:
    return serve("embedd", make_app, "embedd")


if __name__ == "__main__":
    raise SystemExit(main())
