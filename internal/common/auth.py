"""Bearer tokens on every daemon, not only the gateway.

Clients present one of `[gateway] tokens` to the gateway. The gateway, matrixd and
syncd present the *service token* to the daemons behind them: `[gateway] service_token`,
else the first client token (`lakehouse up` generates a random service token for its
children when tokens are configured and none is set). A daemon accepts the service
token or any client token, so a local process without one cannot reach vectord's port
directly. `/healthz` and `/readyz` stay open (supervisors and load balancers poll them).

Scoped keys (internal.common.access): the gateway authenticates a key and sends its scope
in the `Lakehouse-Scope` header with the service token; a daemon takes that header from
the service token only, asks `access.check_request` for every request as the gateway
did, and keeps the scope in `CALLER` for the handler and for its calls to vectord.
A client token presented to a daemon directly is an admin key; a key's secret is known
to the gateway only, so a scoped key reaches a daemon through the gateway.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
from collections.abc import Collection, Iterator, Sequence
from contextvars import ContextVar

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from internal.common import access
from internal.common.errors import Unauthorized
from internal.common.web import KEY_ID_KEY, Handler, error_response, request_id
from internal.config import Config, ConfigError

DAEMON_OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def token_ok(header: str, tokens: Sequence[bytes]) -> bool:
    """Constant-time check of an Authorization header against every token."""
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        return False
    given = presented.strip().encode()
    ok = False
    for token in tokens:
        # No early exit: every token is compared, so timing does not tell which matched.
        ok |= hmac.compare_digest(given, token)
    return ok


def make_auth_middleware(tokens: Sequence[str], open_paths: Collection[str]) -> Middleware:
    """401 for any request outside open_paths without one of the tokens."""
    encoded = [t.encode() for t in tokens]

    @web.middleware
    async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        if request.path not in open_paths and not token_ok(header, encoded):
            return unauthorized(request, refusal(header))
        return await handler(request)

    return auth_middleware


def service_token(cfg: Config) -> str:
    """The token this process presents to the daemons it calls ("" when auth is off)."""
    g = cfg.gateway
    return g.service_token or (g.tokens[0] if g.tokens else "")


def daemon_tokens(cfg: Config) -> tuple[str, ...]:
    """Tokens a daemon accepts; empty means auth is off."""
    g = cfg.gateway
    return tuple(dict.fromkeys((*g.tokens, *((g.service_token,) if g.service_token else ()))))


def service_headers(cfg: Config) -> dict[str, str]:
    """Default headers of a daemon's client session towards the other daemons."""
    token = service_token(cfg)
    return {"Authorization": f"Bearer {token}"} if token else {}


# The scope of the request being served (None: auth is off, nothing is restricted).
CALLER: ContextVar[access.Scope | None] = ContextVar("lakehouse_caller", default=None)


def caller() -> access.Scope | None:
    return CALLER.get()


@contextlib.contextmanager
def as_service() -> Iterator[None]:
    """Calls made inside run as the stack itself (the playbook's own reads and writes,
    after the caller's right to ask for them was decided)."""
    token = CALLER.set(access.SERVICE if CALLER.get() is not None else None)
    try:
        yield
    finally:
        CALLER.reset(token)


def outgoing_scope() -> dict[str, str]:
    """The header carrying the caller's scope to vectord (none for the stack's own calls)."""
    scope = CALLER.get()
    if scope is None or scope.internal:
        return {}
    return {access.SCOPE_HEADER: access.encode(scope)}


def refusal(header: str, known: str = "a configured token") -> str:
    """Why an Authorization header opens nothing here, saying no more than that."""
    scheme, _, presented = header.partition(" ")
    if not header:
        return "missing bearer token (Authorization: Bearer <token>)"
    if scheme.lower() != "bearer" or not presented.strip():
        return "expected Authorization: Bearer <token>"
    return f"unknown token: this port takes {known} only"


def unauthorized(request: web.Request, message: str) -> web.Response:
    """The 401 in the one error body, with RFC 6750's challenge (MCP clients expect it)."""
    err = Unauthorized(message)
    resp = error_response(err.status, err.code, err.message, request_id(request))
    resp.headers["WWW-Authenticate"] = 'Bearer realm="lakehouse"'
    return resp


def make_scope_middleware(cfg: Config) -> Middleware:
    """Every request but /healthz and /readyz: a credential, then the routes table's
    decision; the scope is kept in CALLER (and its key id in the log context)."""
    service = [service_token(cfg).encode()]
    admins = [t.encode() for t in cfg.gateway.tokens]

    @web.middleware
    async def scope_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in DAEMON_OPEN_PATHS:
            return await handler(request)
        header = request.headers.get("Authorization", "")
        scope: access.Scope
        if token_ok(header, service):
            raw = request.headers.get(access.SCOPE_HEADER)
            scope = access.decode(raw) if raw else access.SERVICE
        elif token_ok(header, admins):
            scope = access.ADMIN
        else:
            return unauthorized(request, refusal(
                header, "the admin tokens and the stack's service token (API keys and "
                "tenant tokens enter through the gateway)"))
        request[KEY_ID_KEY] = scope.key_id  # a refusal's access line names the key too
        # Matched as the router matches it: an id's encoded `/` (%2F) stays in its segment.
        access.check_request(scope, request.method, request.rel_url.path_safe)
        token = CALLER.set(scope)
        bound = structlog.contextvars.bind_contextvars(key_id=scope.key_id)
        try:
            return await handler(request)
        finally:
            structlog.contextvars.reset_contextvars(**bound)
            CALLER.reset(token)

    return scope_middleware


def protect(app: web.Application, cfg: Config) -> None:
    """Require a token on every route but /healthz and /readyz when tokens are configured,
    and hold each request to its caller's scope."""
    if daemon_tokens(cfg):
        app.middlewares.append(make_scope_middleware(cfg))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def check_exposure(cfg: Config, section: str) -> None:
    """ConfigError when a daemon would listen beyond loopback with auth off."""
    host = getattr(cfg, section).host
    if not is_loopback(host) and not daemon_tokens(cfg):
        raise ConfigError(
            f"{section}.host",
            f"{host!r} is not a loopback address and no tokens are configured: anyone who "
            "can reach it could read and change every corpus. Set [gateway] tokens (or "
            "LAKEHOUSE_TOKEN), or bind 127.0.0.1")
