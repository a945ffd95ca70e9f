"""The gateway's credentials without a stack: tenant tokens as lakehouse.tenant_token signs
them, the claims a token may carry, admin tokens (the stack test covers keys end to end)."""

from __future__ import annotations

import time

import jwt
import pytest

import lakehouse
from internal.api import keys
from internal.api.keys import KeyAuth
from internal.common import access
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
    assert scope is not None and scope.actions == ("search",)
    assert scope.sees("team-a-docs") and not scope.sees("team-a-other")
    assert scope.filter == {"metadata": {"t": "a"}}
    assert _tenant_scope(row, {"corpora": ["team-b-docs"]}) is None  # past its key
    assert _tenant_scope(row, {"corpora": "team-a-docs"}) is None
    assert _tenant_scope(row, {"filter": {"no_such_field": 1}}) is None
    everything = _tenant_scope(row, {})
    assert everything is not None and everything.sees("team-a-x") and not everything.sees("b")


async def test_admin_tokens_and_unknown_credentials() -> None:
    ring = Keyring(("admin-token",), None)
    assert await ring.scope_of("Bearer admin-token") == access.ADMIN
    assert await ring.scope_of("Bearer other") is None
    assert await ring.scope_of("") is None
    _, secret = keys.new_secret()
    assert await ring.scope_of(f"Bearer {secret}") is None  # no such row
    assert await ring.scope_of(f"Bearer {lakehouse.tenant_token(secret)}") is None
