"""The gateway's credentials without a stack: tenant tokens as lakehouse.tenant_token signs
them, the claims a token may carry, admin tokens (the stack test covers keys end to end)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

import jwt
import msgspec
import pytest

import lakehouse
from internal.api import keys
from internal.api.keys import KeyAuth
from internal.common import access
from internal.common.errors import NotFound, Unauthorized
from internal.gateway.keyauth import Keyring, _tenant_scope


def _row(secret: str, actions: list[str], corpora: list[str]) -> KeyAuth:
    key_id = keys.id_of(secret)
    assert key_id is not None
    return KeyAuth(id=key_id, secret_hash=keys.secret_hash(secret).hex(),
                   signing_key=keys.signing_key(secret).hex(), actions=actions,
                   corpora=corpora, expires_at=None)


def test_the_client_signs_with_the_key_the_server_derives() -> None:
    key_id, secret = keys.new_secret()
    token = lakehouse.tenant_token(secret, corpora=["docs"], filter={"metadata": {"t": "a"}})
    claims = jwt.decode(token, keys.signing_key(secret), algorithms=["HS256"])
    assert claims["key_id"] == key_id and claims["corpora"] == ["docs"]
    assert claims["exp"] > time.time()
    with pytest.raises(ValueError):
        lakehouse.tenant_token(secret, "k" + "1" * 16)  # not this key's id
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, keys.secret_hash(secret), algorithms=["HS256"])


def test_tenant_claims_stay_within_the_key() -> None:
    _, secret = keys.new_secret()
    row = _row(secret, ["search"], ["team-a-*"])
    scope = _tenant_scope(row, {"corpora": ["team-a-docs"], "filter": {"metadata": {"t": "a"}}})
    assert scope.actions == ("search",)
    assert scope.sees("team-a-docs") and not scope.sees("team-a-other")
    assert scope.filter == {"metadata": {"t": "a"}}
    for claims, reason in (
            ({"corpora": ["team-b-docs"]}, "corpora claim goes past its key: 'team-b-docs'"),
            ({"corpora": "team-a-docs"}, "corpora claim: expected a non-empty list"),
            ({"filter": {"no_such_field": 1}}, "filter claim is not a filter")):
        with pytest.raises(Unauthorized, match=re.escape(reason)):
            _tenant_scope(row, claims)
    everything = _tenant_scope(row, {})
    assert everything.sees("team-a-x") and not everything.sees("b")


class Rows:
    """vectord's key lookup (GET /internal/keys/{id}) over rows in memory."""

    def __init__(self, *rows: KeyAuth) -> None:
        self.rows = {r.id: r for r in rows}

    async def call_as(self, _type: type, _method: str, path: str) -> KeyAuth:
        row = self.rows.get(path.rsplit("/", 1)[1])
        if row is None:
            raise NotFound("key not found", field="key_id")
        return row


async def _reason(ring: Keyring, header: str) -> str:
    with pytest.raises(Unauthorized) as exc:
        await ring.scope_of(header)
    return exc.value.message


async def test_admin_tokens_and_unknown_credentials() -> None:
    ring = Keyring(("admin-token",), None)
    assert await ring.scope_of("Bearer admin-token") == access.ADMIN
    assert (await _reason(ring, "Bearer other")).startswith("unknown token")
    assert (await _reason(ring, "")).startswith("missing bearer token")
    assert await _reason(ring, "Basic abc") == "expected Authorization: Bearer <token>"
    _, secret = keys.new_secret()
    assert await _reason(ring, f"Bearer {secret}") == "unknown key"  # no such row
    assert await _reason(ring, f"Bearer {lakehouse.tenant_token(secret)}") == \
        "tenant token of an unknown key"


async def test_a_401_says_why_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Revoked and expired are told to the key's holder only: with another secret of the
    same id, the key is unknown; a tenant token's signature is checked before its key's
    state or its claims."""
    _, live_secret = keys.new_secret()
    _, revoked_secret = keys.new_secret()
    _, expired_secret = keys.new_secret()
    revoked = msgspec.structs.replace(_row(revoked_secret, ["search"], ["docs"]),
                                      revoked_at=datetime.now(timezone.utc))
    expired = msgspec.structs.replace(_row(expired_secret, ["search"], ["docs"]),
                                      expires_at=datetime(2020, 1, 1, tzinfo=timezone.utc))
    ring = Keyring((), Rows(_row(live_secret, ["search"], ["docs"]), revoked, expired))  # type: ignore[arg-type]
    assert (await ring.scope_of(f"Bearer {live_secret}")).corpora == ("docs",)
    assert await _reason(ring, f"Bearer {revoked_secret}") == "key revoked"
    assert await _reason(ring, f"Bearer {expired_secret}") == "key expired"
    forged = revoked_secret[:-4] + ("AAAA" if not revoked_secret.endswith("AAAA") else "BBBB")
    assert await _reason(ring, f"Bearer {forged}") == "unknown key"
    token = lakehouse.tenant_token(live_secret, corpora=["docs"])
    assert (await ring.scope_of(f"Bearer {token}")).within == ("docs",)
    other_key = jwt.encode(jwt.decode(token, options={"verify_signature": False}),
                           b"not the key's signing key, 32 bytes or more", algorithm="HS256")
    assert await _reason(ring, f"Bearer {other_key}") == "tenant token with a bad signature"
    assert await _reason(ring, f"Bearer {lakehouse.tenant_token(live_secret, corpora=['notes'])}") \
        == "tenant token's corpora claim goes past its key: 'notes'"
    assert await _reason(ring, f"Bearer {lakehouse.tenant_token(revoked_secret)}") == \
        "tenant token of a key revoked"
    assert await _reason(ring, f"Bearer {lakehouse.tenant_token(expired_secret)}") == \
        "tenant token of a key expired"
    late = lakehouse.tenant_token(live_secret, expires_in=60)
    assert (await ring.scope_of(f"Bearer {late}")).key_id  # verified, then kept
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 61)  # a kept token expires too
    assert await _reason(ring, f"Bearer {late}") == "tenant token expired (its exp claim is past)"
    assert await _reason(ring, "Bearer a.b.c") == "malformed tenant token"
