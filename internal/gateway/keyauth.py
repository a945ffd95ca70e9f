"""The gateway's credentials: `[gateway] tokens` (admin keys), API keys and tenant tokens.

Each request's credential resolves to a scope (internal.common.access), the routes table
decides, and the proxy passes the scope on to the daemon with the service token. A key's
row is read from vectord (GET /internal/keys/{id}) and kept for REFRESH_SECONDS, so a
revoked key stops working on every gateway replica within that time; secrets are
compared in constant time (their SHA-256) and never logged.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Collection, Sequence
from datetime import datetime, timezone
from typing import Any

import jwt
import msgspec
import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from internal.api import keys
from internal.api.keys import KeyAuth
from internal.api.vectord import Filter
from internal.clients.base import ServiceClient
from internal.common import access
from internal.common.access import Scope
from internal.common.auth import token_ok, unauthorized
from internal.common.errors import NotFound
from internal.common.web import KEY_ID_KEY, Handler

log = structlog.get_logger()

REFRESH_SECONDS = 0.5  # a revocation reaches every replica within this (DECISIONS.md)
SCOPE_KEY = "lakehouse_scope"
_TOKENS_KEPT = 10_000


class Keyring:
    """Credential -> scope; None when it opens nothing (401)."""

    def __init__(self, admin_tokens: Sequence[str], vectord: ServiceClient | None) -> None:
        self.admins = [t.encode() for t in admin_tokens]
        self.vectord = vectord
        self._rows: dict[str, tuple[float, KeyAuth | None]] = {}
        self._tenants: dict[str, tuple[str, Scope]] = {}  # token -> (key id, scope)

    async def scope_of(self, header: str) -> Scope | None:
        scheme, _, presented = header.partition(" ")
        given = presented.strip()
        if scheme.lower() != "bearer" or not given:
            return None
        if token_ok(header, self.admins):
            return access.ADMIN
        if given.startswith(keys.PREFIX):
            return await self._key(given)
        if given.count(".") == 2:
            return await self._tenant(given)
        return None

    async def _row(self, key_id: str) -> KeyAuth | None:
        """The key's row (cached for REFRESH_SECONDS), None when revoked or expired."""
        now = time.monotonic()
        hit = self._rows.get(key_id)
        if hit is None or now - hit[0] >= REFRESH_SECONDS:
            row: KeyAuth | None = None
            if self.vectord is not None:
                try:
                    row = await self.vectord.call_as(KeyAuth, "GET", f"/internal/keys/{key_id}")
                except NotFound:
                    row = None
            if len(self._rows) > _TOKENS_KEPT:
                self._rows.clear()
            hit = self._rows[key_id] = (now, row)
        row = hit[1]
        if row is not None and row.expires_at is not None and row.expires_at <= _utcnow():
            return None
        return row

    async def _key(self, secret: str) -> Scope | None:
        key_id = keys.id_of(secret)
        if key_id is None:
            return None
        row = await self._row(key_id)
        if row is None or not hmac.compare_digest(keys.secret_hash(secret),
                                                  bytes.fromhex(row.secret_hash)):
            return None
        return Scope(key_id=row.id, actions=tuple(row.actions), corpora=tuple(row.corpora))

    async def _tenant(self, token: str) -> Scope | None:
        kept = self._tenants.get(token)
        if kept is not None:  # verified before: only the key's state may have changed
            row = await self._row(kept[0])
            return kept[1] if row is not None else None
        try:
            key_id = jwt.decode(token, options={"verify_signature": False}).get("key_id")
        except jwt.PyJWTError:
            return None
        if not isinstance(key_id, str) or not keys.valid_id(key_id):
            return None
        row = await self._row(key_id)
        if row is None or not ({"search", "admin"} & set(row.actions)):
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token, bytes.fromhex(row.signing_key), algorithms=["HS256"],
                options={"require": ["exp", "key_id"]})
        except jwt.PyJWTError:
            return None
        scope = _tenant_scope(row, claims)
        if scope is not None:
            if len(self._tenants) > _TOKENS_KEPT:
                self._tenants.clear()
            self._tenants[token] = (row.id, scope)
        return scope


def _tenant_scope(row: KeyAuth, claims: dict[str, Any]) -> Scope | None:
    """The token's scope: search only, its corpora within the key's, its filter forced;
    None when a claim is malformed or reaches past the key."""
    key = Scope(key_id=row.id, actions=tuple(row.actions), corpora=tuple(row.corpora))
    corpora = claims.get("corpora")
    within: tuple[str, ...] | None = None
    if corpora is not None:
        if not isinstance(corpora, list) or not corpora or not all(
                isinstance(c, str) and key.sees(c) for c in corpora):
            return None
        within = tuple(corpora)
    flt = claims.get("filter")
    if flt is not None:
        try:
            msgspec.convert(flt, Filter)
        except msgspec.ValidationError:
            return None
    return Scope(key_id=row.id, actions=("search",), corpora=key.corpora if not key.admin
                 else ("*",), within=within, filter=flt)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def make_keys_middleware(keyring: Keyring, open_paths: Collection[str]) -> Middleware:
    """401 without a credential, else the routes table's decision; the scope is kept on
    the request for the proxy (and its key id for the access log)."""

    @web.middleware
    async def keys_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        scope = await keyring.scope_of(request.headers.get("Authorization", ""))
        if scope is None:
            return unauthorized(request)
        request[KEY_ID_KEY] = scope.key_id
        access.check_request(scope, request.method, request.path)
        request[SCOPE_KEY] = scope
        return await handler(request)

    return keys_middleware


async def whoami(request: web.Request) -> web.Response:
    """GET /v1/keys/self: the caller's own scope (the console hides what it may not do)."""
    scope: Scope | None = request.get(SCOPE_KEY)
    body = (msgspec.to_builtins(scope) if scope is not None
            else {"key_id": None, "actions": ["admin"], "corpora": ["*"]})
    body.pop("internal", None)
    return web.json_response(body)
