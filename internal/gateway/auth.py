"""Optional bearer-token auth at the gateway; health and the API document stay open."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp.typedefs import Middleware

from internal.common import auth
from internal.common.auth import token_ok

__all__ = ["OPEN_PATHS", "make_auth_middleware", "token_ok"]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})


def make_auth_middleware(tokens: Sequence[str]) -> Middleware:
    """The client tokens ([gateway] tokens) guard every route but OPEN_PATHS."""
    return auth.make_auth_middleware(tokens, OPEN_PATHS)
