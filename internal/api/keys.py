"""API keys' wire types and the derivations of a key's secret (I/O-free).

A key's secret is `lhk_<id>_<random>`: the id names its row, the server keeps only the
SHA-256 of the whole secret (compared in constant time) and the key tenant tokens are
signed with, HMAC-SHA256 of the secret under a fixed label, which the application derives
from the secret the same way (lakehouse.tenant). Neither gives the secret back.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from typing import Annotated

import msgspec
from msgspec import Meta

from internal.common.access import ACTIONS
from internal.common.errors import InvalidArgument

PREFIX = "lhk_"
TENANT_LABEL = b"lakehouse tenant token v1"  # must match lakehouse/tenant.py
ID_RE = re.compile(r"^k[0-9a-f]{16}$")
_SECRET_RE = re.compile(r"^lhk_(k[0-9a-f]{16})_[A-Za-z0-9_-]{20,100}$")
# A corpus name (internal.api.validate) or a glob over them: * ? [ ].
_PATTERN_RE = re.compile(r"^[a-z0-9_*?\[\]-]{1,63}$")


class CreateKey(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/keys."""

    name: Annotated[str, Meta(min_length=1, max_length=200)]
    actions: Annotated[list[str], Meta(min_length=1, max_length=5)]
    corpora: Annotated[list[str], Meta(min_length=1, max_length=100)]
    expires_at: datetime | None = None


class KeyInfo(msgspec.Struct, omit_defaults=False):
    """A key as listed: never its secret."""

    id: str
    name: str
    actions: list[str]
    corpora: list[str]
    expires_at: datetime | None
    created_at: datetime
    last_used_at: datetime | None = None


class CreatedKey(KeyInfo, kw_only=True):
    key: str  # the secret, shown once


class KeyList(msgspec.Struct):
    keys: list[KeyInfo]


class KeyRevoked(msgspec.Struct):
    revoked: str


class KeyAuth(msgspec.Struct):
    """What the gateway reads to authenticate a key (vectord's internal route)."""

    id: str
    secret_hash: str  # hex
    signing_key: str  # hex
    actions: list[str]
    corpora: list[str]
    expires_at: datetime | None
    revoked_at: datetime | None = None


def check(body: CreateKey) -> CreateKey:
    """The request, or a 400 naming the field."""
    for i, a in enumerate(body.actions):
        if a not in ACTIONS:
            raise InvalidArgument(f"actions[{i}]: expected one of {', '.join(ACTIONS)}, got {a!r}",
                                  field=f"actions[{i}]")
    for i, c in enumerate(body.corpora):
        if not _PATTERN_RE.match(c):
            raise InvalidArgument(f"corpora[{i}]: expected a corpus name or a glob pattern "
                                  f"(a-z 0-9 _ - * ? [ ]), got {c[:70]!r}", field=f"corpora[{i}]")
    if body.expires_at is not None and body.expires_at.tzinfo is None:
        raise InvalidArgument("expires_at: give a time zone (RFC 3339)", field="expires_at")
    return body


def new_secret() -> tuple[str, str]:
    """(id, secret) of a new key."""
    key_id = "k" + secrets.token_hex(8)
    return key_id, f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def id_of(secret: str) -> str | None:
    """The key id a secret names, None when it is not shaped like one."""
    m = _SECRET_RE.match(secret)
    return m.group(1) if m else None


def valid_id(key_id: str) -> bool:
    return bool(ID_RE.match(key_id))


def secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def signing_key(secret: str) -> bytes:
    """The HS256 key of the tenant tokens signed with this secret."""
    return hmac.new(secret.encode(), TENANT_LABEL, hashlib.sha256).digest()
