"""Optional bearer-token auth at the gateway; health and the API document stay open."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from internal.common.errors import Unauthorized
from internal.common.web import Handler, error_response, request_id

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})


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


def make_auth_middleware(tokens: Sequence[str], also_open: Iterable[str] = ()) -> Middleware:
    """Every path needs a token but OPEN_PATHS and `also_open` (exact paths: the console's
    static files, whose page asks for a token when the API answers 401)."""
    encoded = [t.encode() for t in tokens]
    open_paths = OPEN_PATHS | frozenset(also_open)

    @web.middleware
    async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in open_paths and not token_ok(
                request.headers.get("Authorization", ""), encoded):
            err = Unauthorized("missing or invalid bearer token")
            resp = error_response(err.status, err.code, err.message, request_id(request))
            # RFC 6750; MCP clients (this gateway serves /mcp) expect it on a 401.
            resp.headers["WWW-Authenticate"] = 'Bearer realm="lakehouse"'
            return resp
        return await handler(request)

    return auth_middleware
