"""The gateway: one port for users, routing /v1/* to the daemons that serve it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from internal.clients.base import ServiceClient
from internal.clients.vectord import VectordClient
from internal.common.auth import service_headers, service_token
from internal.common.daemon import serve
from internal.common.errors import LakehouseError
from internal.common.upstream import Upstream
from internal.common.web import Handler, json_response, make_base_app, route
from internal.config import Config
from internal.gateway import admission, console, openapi, readiness
from internal.gateway.admission import Admission
from internal.gateway.auth import OPEN_PATHS
from internal.gateway.fairness import Shares
from internal.gateway.keyauth import Keyring, make_keys_middleware, whoami
from internal.gateway.metrics import Metrics
from internal.gateway.proxy import Limits, Proxy
from internal.gateway.routes import READ_POSTS, RETRY_SAFE_POSTS, ROUTES, TIMEOUT_FIELDS, Route
from internal.ha.status import ha_in

log = structlog.get_logger()

SESSION = web.AppKey("session", aiohttp.ClientSession)
PROXY = web.AppKey("proxy", Proxy)
UPSTREAMS = web.AppKey("upstreams", dict[str, Upstream])
METRICS = web.AppKey("metrics", Metrics)
# vectord as the stack (its storage figures for /metrics).
VECTORD = web.AppKey("vectord", VectordClient)


def make_upstreams(cfg: Config) -> dict[str, Upstream]:
    g = cfg.gateway
    return {name: Upstream(name, getattr(g, name), g.backoff_seconds) for name in TIMEOUT_FIELDS}


# Methods whose call may be sent again to another replica when a connection is lost.
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _proxy_handler(cfg: Config, route: Route) -> Handler:
    timeout = float(getattr(cfg.gateway, TIMEOUT_FIELDS[route.upstream]))
    keep_auth = route.forward_auth
    retry_post = route.method == "POST" and route.path in RETRY_SAFE_POSTS
    read_post = route.path in READ_POSTS

    async def handler(request: web.Request) -> web.StreamResponse:
        app = request.app
        idempotent = retry_post or request.method in _SAFE_METHODS
        write = not (read_post or request.method in _SAFE_METHODS)
        return await app[PROXY].forward(request, app[UPSTREAMS][route.upstream], timeout,
                                        idempotent, keep_auth, write=write)

    return handler


def make_app(cfg: Config) -> web.Application:
    """The gateway app: proxy routes, health, readiness, metrics, API document."""
    app = make_base_app(max_body_bytes=cfg.gateway.max_body_bytes)
    metrics = app[METRICS] = Metrics()
    app[UPSTREAMS] = make_upstreams(cfg)
    # Metrics see the final status, so they wrap the error-rendering middleware.
    app.middlewares.insert(0, metrics.middleware())
    keyring = Keyring(cfg.gateway.tokens, None)
    _add_admission(app, cfg, keyring, metrics)
    app.cleanup_ctx.append(_sessions(cfg, keyring))
    _add_routes(app, cfg)
    return app


def _add_admission(app: web.Application, cfg: Config, keyring: Keyring, metrics: Metrics) -> None:
    """The key check (when tokens are configured), then the search and write queues."""
    g = cfg.gateway
    if g.tokens:
        app.middlewares.append(make_keys_middleware(keyring, OPEN_PATHS | console.OPEN_PATHS))
    # After auth: a client is counted by the credential that was checked (its key's id).
    searches = Admission("search", Shares(g.search_slots(), g.client_in_flight, g.client_queue,
                                          g.light_in_flight, g.share_seconds,
                                          g.alone_slots()),
                         g.queue_timeout, metrics)
    writes = Admission("write", Shares(g.max_in_flight, g.client_in_flight, g.client_queue),
                       g.queue_timeout, metrics)
    app.middlewares.append(admission.make_middleware(searches, writes, READ_POSTS,
                                                     auth_on=bool(g.tokens),
                                                     light_priority=g.light_priority))


def _sessions(cfg: Config, keyring: Keyring
              ) -> Callable[[web.Application], AsyncIterator[None]]:
    """The cleanup context of the proxy's sessions (reads and writes) and the keyring's."""
    g = cfg.gateway

    def session() -> aiohttp.ClientSession:
        # auto_decompress off: bodies are relayed byte for byte, Content-Encoding intact.
        # limit_per_host: each daemon address has its own budget, so one daemon's slow
        # answers cannot take the connections another daemon's requests need; and reads
        # and writes have a budget each, so a bulk load cannot take a search's.
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=g.upstream_connections,
                                         keepalive_timeout=30)
        return aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                     cookie_jar=aiohttp.DummyCookieJar())

    async def session_ctx(app: web.Application) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack, session() as reads, session() as writes:
            app[SESSION] = reads
            # Key lookups: JSON from vectord as the stack (its own session: the proxy's
            # relays compressed bodies untouched).
            keys_session = await stack.enter_async_context(
                aiohttp.ClientSession(headers=service_headers(cfg)))
            keyring.vectord = ServiceClient(keys_session, app[UPSTREAMS]["vectord"], "vectord",
                                            timeout=g.vectors_timeout)
            app[VECTORD] = VectordClient(keys_session, app[UPSTREAMS]["vectord"], timeout=5.0)
            app[PROXY] = Proxy(reads, app[METRICS], Limits(
                max_body_bytes=g.max_body_bytes, body_timeout=g.body_timeout,
                buffer_bytes=g.buffer_bytes, upstream_wait=g.upstream_wait,
                stream_slots=g.stream_slots), service_token(cfg), write_session=writes)
            yield

    return session_ctx


async def readyz(request: web.Request) -> web.Response:
    metrics = request.app[METRICS]
    ready = await readiness.check(request.app[SESSION], request.app[UPSTREAMS])
    metrics.observe_replicas(readiness.replicas_of(ready))
    metrics.observe_ha(ha_in(readiness.vectord_readyz(ready)))
    return json_response(ready, status=200 if ready.status == "ok" else 503)


async def metrics_handler(request: web.Request) -> web.Response:
    # The standbys' lag is vectord's to measure, embedd's lanes embedd's: asked for
    # at each scrape.
    metrics = request.app[METRICS]
    upstreams = request.app[UPSTREAMS]
    bodies: dict[str, Any] = {}
    ready = await readiness.check(request.app[SESSION], upstreams, bodies)
    metrics.observe_replicas(readiness.replicas_of(ready))
    metrics.observe_ha(ha_in(readiness.vectord_readyz(ready)))
    for address in upstreams["embedd"].addresses:
        metrics.observe_embed_lanes(address, readiness.embed_lanes_of(bodies.get(address)))
    if ready.components.get("vectord", None) is not None and \
            ready.components["vectord"].status == "ok":
        try:
            metrics.observe_storage(await request.app[VECTORD].storage())
        except LakehouseError as exc:  # the scrape goes on; the gauges keep their last
            log.warning("metrics_storage_failed", error=exc.message)
    return await metrics.handler(request)


def _add_routes(app: web.Application, cfg: Config) -> None:
    """The gateway's own routes, every proxied route of the table, and the console's."""
    document = openapi.build(secured=bool(cfg.gateway.tokens), cfg=cfg)

    async def openapi_json(_: web.Request) -> web.Response:
        return json_response(document)

    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/openapi.json", openapi_json)
    app.router.add_get("/v1/keys/self", whoami)
    for r in ROUTES:
        app.router.add_route(r.method, route(r.path), _proxy_handler(cfg, r))
    console.add_routes(app, cfg)


def main() -> int:
    return serve("gateway", make_app, "gateway")


if __name__ == "__main__":
    raise SystemExit(main())
