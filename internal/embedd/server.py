"""embedd: turns text into vectors for every other daemon (POST /v1/embed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import msgspec
import structlog
from aiohttp import web

from internal.api.embedd import (
    INTERACTIVE_PATH,
    LANE_HEADER,
    NEAREST_PATH,
    WAIT_HEADER,
    EmbedRequest,
    NearestRequest,
    NearestResponse,
)
from internal.api.responses import EmbedResponse
from internal.common.auth import protect, service_token, token_ok
from internal.common.daemon import serve
from internal.common.errors import InvalidArgument, Unauthorized
from internal.common.web import json_response, make_base_app, read_json
from internal.config import Config
from internal.embedd.backends import Backend
from internal.embedd.coalesce import Lane
from internal.embedd.nearest import nearest_each
from internal.embedd.registry import open_backends
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


def _service_only(request: web.Request) -> None:
    """401 unless the service token came (the interactive lane's routes)."""
    if not request.app[SERVICE_ONLY](request.headers.get("Authorization", "")):
        raise Unauthorized(f"{request.path} takes the service token only")


async def interactive_handler(request: web.Request) -> web.Response:
    """Questions of the daemons' search paths: the interactive lane."""
    _service_only(request)
    return await _embed(request, Lane.INTERACTIVE)


async def nearest_handler(request: web.Request) -> web.Response:
    """Each group's passage nearest the query vector, embedded on the interactive lane
    (a search's semantic highlights): indices only, never the vectors."""
    _service_only(request)
    req = await read_json(request, NearestRequest)
    for i, group in enumerate(req.groups):
        if not group:
            raise InvalidArgument(f"groups[{i}]: must hold at least one text",
                                  field=f"groups[{i}]")
        for j, text in enumerate(group):
            if not text.strip():
                raise InvalidArgument(f"groups[{i}][{j}]: must not be empty or blank",
                                      field=f"groups[{i}][{j}]")
    service = request.app[SERVICE]

    def check_query(dim: int | None) -> None:
        if dim and len(req.query) != dim:
            raise InvalidArgument(f"query: {len(req.query)} numbers, the model's vectors "
                                  f"have {dim}", field="query")

    check_query(service.pick(req.model).dim)  # before the model runs, when the dim is known
    out = await service.embed([t for g in req.groups for t in g], req.model, "document",
                              Lane.INTERACTIVE)
    check_query(out.dim)  # a remote model's dim is known after its first answer
    resp = json_response(NearestResponse(
        model=out.model, nearest=nearest_each(req.query, out.vectors,
                                              [len(g) for g in req.groups])))
    resp.headers[LANE_HEADER] = Lane.INTERACTIVE.value
    resp.headers[WAIT_HEADER] = f"{out.wait_s * 1000:.3f}"
    return resp


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
                backends.extend(await open_backends(kind, ecfg, session))
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
    app.router.add_post(NEAREST_PATH, nearest_handler)
    app.router.add_get("/v1/embed/models", models_handler)
    app.router.add_get("/v1/embed/lanes", lanes_handler)
    app.router.add_get("/readyz", readyz)
    return app


def main() -> int:
    return serve("embedd", make_app, "embedd")


if __name__ == "__main__":
    raise SystemExit(main())
