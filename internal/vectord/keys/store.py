"""API keys in PostgreSQL: the SQL of /v1/keys and of the gateway's key lookups."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from internal.api.keys import KeyAuth, KeyInfo
from internal.pg.resilient import ResilientPool

INSERT_KEY = """
INSERT INTO lakehouse_keys (id, name, secret_hash, signing_key, actions, corpora, expires_at)
VALUES (%(id)s, %(name)s, %(secret_hash)s, %(signing_key)s, %(actions)s, %(corpora)s,
        %(expires_at)s)
RETURNING id, name, actions, corpora, expires_at, created_at, last_used_at
"""
LIST_KEYS = """
SELECT id, name, actions, corpora, expires_at, created_at, last_used_at
FROM lakehouse_keys WHERE revoked_at IS NULL ORDER BY created_at, id
"""
# A revoked key's row is kept, marked: its holder is told why it opens nothing.
REVOKE_KEY = """
UPDATE lakehouse_keys SET revoked_at = now() WHERE id = %(id)s AND revoked_at IS NULL
"""
# The gateway's lookup marks a live key used (at most once a second per key and replica:
# the gateway caches what it read for under a second).
USE_KEY = """
UPDATE lakehouse_keys
SET last_used_at = CASE WHEN revoked_at IS NULL THEN now() ELSE last_used_at END
WHERE id = %(id)s
RETURNING id, secret_hash, signing_key, actions, corpora, expires_at, revoked_at
"""


async def create(pool: ResilientPool, key_id: str, name: str, secret_hash: bytes,
                 signing_key: bytes, actions: list[str], corpora: list[str],
                 expires_at: datetime | None) -> KeyInfo:
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(INSERT_KEY, {
            "id": key_id, "name": name, "secret_hash": secret_hash, "signing_key": signing_key,
            "actions": actions, "corpora": corpora, "expires_at": expires_at})
        row = await cur.fetchone()
    assert row is not None
    return KeyInfo(**row)


async def list_keys(pool: ResilientPool) -> list[KeyInfo]:
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(LIST_KEYS)
        return [KeyInfo(**r) for r in await cur.fetchall()]


async def revoke(pool: ResilientPool, key_id: str) -> bool:
    """Mark the key revoked; False when there is no live key of that id."""
    async with pool.connection() as conn:
        cur = await conn.execute(REVOKE_KEY, {"id": key_id})
        return cur.rowcount > 0


async def use(pool: ResilientPool, key_id: str) -> KeyAuth | None:
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(USE_KEY, {"id": key_id})
        row: dict[str, Any] | None = await cur.fetchone()
    if row is None:
        return None
    return KeyAuth(id=row["id"], secret_hash=bytes(row["secret_hash"]).hex(),
                   signing_key=bytes(row["signing_key"]).hex(), actions=list(row["actions"]),
                   corpora=list(row["corpora"]), expires_at=row["expires_at"],
                   revoked_at=row["revoked_at"])
