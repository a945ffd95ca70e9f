"""embedd: turns text into vectors for every other daemon (POST /v1/embed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import structlog
from aiohttp import web

from internal.api.embedd import EmbedRequest
from internal.common.auth import protect
from internal.common.daemon import serve
from internal.common.web import json_response, make_base_app, read_json
from internal.config import Config
from internal.embedd.backends import Backend, LocalBackend, OllamaBackend, OpenAIBackend
from internal.embedd.service import EmbedService

log = structlog.get_logger()

SERVICE = web.AppKey("embedd_service", EmbedService)


async def embed_handler(request: web.Request) -> web.Response:
    req = await read_json(request, EmbedRequest)
    out = await request.app[SERVICE].embed(req.texts, req.model, req.input_type or "document")
    return json_response({"model": out.model, "dim": out.dim,
                          "vectors": out.vectors.tolist(), "truncated": out.truncated})


async def models_handler(request: web.Request) -> web.Response:
    return json_response(request.app[SERVICE].models())


async def readyz(request: web.Request) -> web.Response:
    service = request.app.get(SERVICE)
    if service is None:
        return json_response({"status": "degraded", "components": {"model": "loading"}}, 503)
    return json_response({"status": "ok",
                          "components": {b.kind: "ok" for b in service.backends}})


def make_app(cfg: Config) -> web.Application:
    """The embedd app; backends open in a cleanup_ctx and close with the app."""
    ecfg = cfg.embedd
    app = make_base_app()
    protect(app, cfg)

    async def backends_ctx(app: web.Application) -> AsyncIterator[None]:
        session = aiohttp.ClientSession()
        backends: list[Backend] = []
        try:
            for kind in ecfg.enabled():
                if kind == "local":
                    backends.append(await LocalBackend.open(ecfg))
                elif kind == "ollama":
                    backends.append(OllamaBackend(ecfg))
                else:
                    backends.append(OpenAIBackend(ecfg, session))
            service = EmbedService(backends, ecfg.cache_size, ecfg.max_texts)
            app[SERVICE] = service
            log.info("embedd_ready", models=service.models()["models"])
            yield
        finally:
            for b in backends:
                await b.close()
            await session.close()

    app.cleanup_ctx.append(backends_ctx)
    app.router.add_post("/v1/embed", embed_handler)
    app.router.add_get("/v1/embed/models", models_handler)
    app.router.add_get("/readyz", readyz)
    return app


def main() -> int:
    return serve("embedd", make_app, "embedd")


if __name__ == "__main__":
    raise SystemExit(main())
