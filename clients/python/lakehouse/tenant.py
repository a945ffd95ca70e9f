"""Tenant tokens: a JWT an application signs itself with a `search` key's secret.

Every search made with the token is held to its `corpora` (a subset of the key's) with its
`filter` forced in (Lakehouse's filter syntax, ANDed with the caller's), until `exp`.
The signing key is derived from the secret exactly as the server derives it
(internal/api/keys.py, `signing_key`), so the secret itself never leaves the application.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Sequence
from typing import Any

import jwt

_TENANT_LABEL = b"lakehouse tenant token v1"  # must match internal/api/keys.py
_SECRET_RE = re.compile(r"^lhk_(k[0-9a-f]{16})_")


def tenant_token(key: str, key_id: str | None = None, *, corpora: Sequence[str] | None = None,
                 filter: dict[str, Any] | None = None, expires_in: float = 3600.0) -> str:
    """A tenant token signed with `key` (a search key's secret, `lhk_...`), valid for
    `expires_in` seconds; `key_id` defaults to the id the secret names."""
    m = _SECRET_RE.match(key)
    if m is None:
        raise ValueError("key: expected an API key's secret (lhk_...)")
    if key_id is None:
        key_id = m.group(1)
    elif key_id != m.group(1):
        raise ValueError(f"key_id: {key_id!r} is not the id of this key")
    if expires_in <= 0:
        raise ValueError("expires_in: must be positive")
    claims: dict[str, Any] = {"key_id": key_id, "exp": int(time.time() + expires_in)}
    if corpora is not None:
        claims["corpora"] = list(corpora)
    if filter is not None:
        claims["filter"] = filter
    signing_key = hmac.new(key.encode(), _TENANT_LABEL, hashlib.sha256).digest()
    return jwt.encode(claims, signing_key, algorithm="HS256")
