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
from internal.common.errors import NotFound, Unauthorized
from internal.common.web import KEY_ID_KEY, Handler

log = structlog.get_logger()

REFRESH_SECONDS = 0.5  # a revocation reaches every replica within this (docs/decisions/0123-api-keys.md)
SCOPE_KEY = "lakehouse_scope"
_TOKENS_KEPT = 10_000


class Keyring:
    """Credential -> scope, or Unauthorized saying why not.

    The reason never tells more than the credential's holder may know: a key's secret or
    a tenant token's signature is checked before "revoked" or "expired" is said, so
    anyone else learns "unknown key" or "bad signature" only.
    """

    def __init__(self, admin_tokens: Sequence[str], vectord: ServiceClient | None) -> None:
        self.admins = [t.encode() for t in admin_tokens]
        self.vectord = vectord
        self._rows: dict[str, tuple[float, KeyAuth | None]] = {}
        # token -> (key id, scope, its exp claim): verified once, its key re-read after.
        self._tenants: dict[str, tuple[str, Scope, float]] = {}

    async def scope_of(self, header: str) -> Scope:
        scheme, _, presented = header.partition(" ")
        given = presented.strip()
        if not header:
            raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
        if scheme.lower() != "bearer" or not given:
            raise Unauthorized("expected Authorization: Bearer <token>")
        if token_ok(header, self.admins):
            return access.ADMIN
        if given.startswith(keys.PREFIX):
            return await self._key(given)
        if given.count(".") == 2:
            return await self._tenant(given)
        raise Unauthorized("unknown token: neither an admin token, an API key (lhk_...) "
                           "nor a tenant token")

    async def _row(self, key_id: str) -> KeyAuth | None:
        """The key's row, revoked or not (cached for REFRESH_SECONDS); None when none."""
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
        return hit[1]

    async def _key(self, secret: str) -> Scope:
        key_id = keys.id_of(secret)
        row = await self._row(key_id) if key_id is not None else None
        if row is None or not hmac.compare_digest(keys.secret_hash(secret),
                                                  bytes.fromhex(row.secret_hash)):
            raise Unauthorized("unknown key")
        ended = _ended(row)
        if ended:
            raise Unauthorized(f"key {ended}")
        return Scope(key_id=row.id, actions=tuple(row.actions), corpora=tuple(row.corpora))

    async def _tenant(self, token: str) -> Scope:
        kept = self._tenants.get(token)
        if kept is not None:  # verified before: only the key's state and the clock move
            key_id, scope, exp = kept
            await self._tenant_key(key_id)
            if exp <= time.time():
                raise Unauthorized("tenant token expired (its exp claim is past)")
            return scope
        try:
            claimed = jwt.decode(token, options={"verify_signature": False}).get("key_id")
        except jwt.PyJWTError:
            raise Unauthorized("malformed tenant token") from None
        if not isinstance(claimed, str) or not keys.valid_id(claimed):
            raise Unauthorized("tenant token without a valid key_id claim")
        row = await self._row(claimed)
        if row is None:
            raise Unauthorized("tenant token of an unknown key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, bytes.fromhex(row.signing_key), algorithms=["HS256"],
                options={"require": ["exp", "key_id"]})
        except jwt.InvalidSignatureError:
            raise Unauthorized("tenant token with a bad signature") from None
        except jwt.ExpiredSignatureError:  # checked after the signature
            raise Unauthorized("tenant token expired (its exp claim is past)") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthorized(f"tenant token without the {exc.claim} claim") from None
        except jwt.PyJWTError:
            raise Unauthorized("malformed tenant token") from None
        await self._tenant_key(claimed)
        scope = _tenant_scope(row, claims)
        if len(self._tenants) > _TOKENS_KEPT:
            self._tenants.clear()
        self._tenants[token] = (row.id, scope, float(claims["exp"]))
        return scope

    async def _tenant_key(self, key_id: str) -> KeyAuth:
        """The row of a tenant token's key when it may still sign tokens."""
        row = await self._row(key_id)
        if row is None:
            raise Unauthorized("tenant token of an unknown key")
        ended = _ended(row)
        if ended:
            raise Unauthorized(f"tenant token of a key {ended}")
        if not {"search", "admin"} & set(row.actions):
            raise Unauthorized("tenant token of a key that may not search")
        return row


def _ended(row: KeyAuth) -> str:
    """'revoked' or 'expired' when the key opens nothing any more, else ""."""
    if row.revoked_at is not None:
        return "revoked"
    if row.expires_at is not None and row.expires_at <= _utcnow():
        return "expired"
    return ""


def _tenant_scope(row: KeyAuth, claims: dict[str, Any]) -> Scope:
    """The token's scope: search only, its corpora within the key's, its filter forced;
    Unauthorized naming the claim that is malformed or reaches past the key."""
    key = Scope(key_id=row.id, actions=tuple(row.actions), corpora=tuple(row.corpora))
    corpora = claims.get("corpora")
    within: tuple[str, ...] | None = None
    if corpora is not None:
        if not isinstance(corpora, list) or not corpora or not all(
                isinstance(c, str) for c in corpora):
            raise Unauthorized("tenant token's corpora claim: expected a non-empty list of "
                               "corpus names")
        past = [c for c in corpora if not key.sees(c)]
        if past:
            raise Unauthorized(f"tenant token's corpora claim goes past its key: "
                               f"{', '.join(repr(c[:64]) for c in past[:5])}")
        within = tuple(corpora)
    flt = claims.get("filter")
    if flt is not None:
        try:
            msgspec.convert(flt, Filter)
        except msgspec.ValidationError as exc:
            raise Unauthorized(f"tenant token's filter claim is not a filter: {exc}") from None
    return Scope(key_id=row.id, actions=("search",), corpora=key.corpora if not key.admin
                 else ("*",), within=within, filter=flt)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def make_keys_middleware(keyring: Keyring, open_paths: Collection[str]) -> Middleware:
    """401 saying why without a usable credential, else the routes table's decision; the
    scope is kept on the request for the proxy (and its key id for the access log)."""

    @web.middleware
    async def keys_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        try:
            scope = await keyring.scope_of(request.headers.get("Authorization", ""))
        except Unauthorized as exc:
            return unauthorized(request, exc.message)
        request[KEY_ID_KEY] = scope.key_id
        # Matched as the router matches it: an id's encoded `/` (%2F) stays in its segment.
        access.check_request(scope, request.method, request.rel_url.path_safe)
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
