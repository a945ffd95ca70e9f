"""Optional bearer-token auth at the gateway; health and the API document stay open."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aiohttp.typedefs import Middleware

from internal.common import auth
from internal.common.auth import token_ok

__all__ = ["OPEN_PATHS", "make_auth_middleware", "token_ok"]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})


def make_auth_middleware(tokens: Sequence[str], also_open: Iterable[str] = ()) -> Middleware:
    """The client tokens ([gateway] tokens) guard every route but OPEN_PATHS and `also_open`
    (exact paths: the console's static files, whose page asks for a token when the API
    answers 401)."""
    return auth.make_auth_middleware(tokens, OPEN_PATHS | frozenset(also_open))
