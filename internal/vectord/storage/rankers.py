"""The learned ranker's models in PostgreSQL (lakehouse_rankers): the SQL of /internal/rankers.

A model is a version: stored once, never changed. The current model of a (playbook,
corpora) is its newest; a model counts only while its playbook corpus is the one it was
trained on (the registry id kept in `playbook_id`), so a playbook deleted and made again
starts without a model. Older versions beyond KEEP_VERSIONS are deleted when one is stored.
"""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from internal.api.ranker import KEEP_VERSIONS, NewRanker, RankerSaved, StoredRanker
from internal.common.errors import NotFound
from internal.pg.resilient import ResilientPool

_FIELDS = ("playbook_corpus", "corpora", "trained_by", "records", "playbook_count", "queries",
           "examples", "seconds", "trees", "alpha", "reason", "ndcg10_boost", "ndcg10_ranker",
           "cv", "features", "model")

INSERT_RANKER = f"""
INSERT INTO lakehouse_rankers (playbook_id, {", ".join(_FIELDS)})
SELECT c.id, {", ".join(f"%({f})s" for f in _FIELDS)}
FROM vectord_corpora c WHERE c.name = %(playbook_corpus)s
RETURNING id, playbook_id, created_at
"""
# Versions of a playbook made again (another registry id), and beyond the newest
# KEEP_VERSIONS of this (playbook, corpora).
PRUNE_RANKERS = """
DELETE FROM lakehouse_rankers
WHERE playbook_corpus = %(playbook_corpus)s
  AND (playbook_id <> %(playbook_id)s
       OR (corpora = %(corpora)s AND id NOT IN (
             SELECT id FROM lakehouse_rankers
             WHERE playbook_corpus = %(playbook_corpus)s AND corpora = %(corpora)s
             ORDER BY id DESC LIMIT %(keep)s)))
"""
_LIVE = """
FROM lakehouse_rankers r
JOIN vectord_corpora c ON c.name = r.playbook_corpus AND c.id = r.playbook_id
"""
_COLUMNS = "r.id, r.created_at, " + ", ".join(f"r.{f}" for f in _FIELDS if f != "model")
LIST_RANKERS = f"""
SELECT {_COLUMNS}, NULL AS model {_LIVE}
WHERE %(playbook_corpus)s::text IS NULL OR r.playbook_corpus = %(playbook_corpus)s
ORDER BY r.id DESC LIMIT %(limit)s
"""
CURRENT_RANKERS = f"""
SELECT DISTINCT ON (r.playbook_corpus, r.corpora) {_COLUMNS}, r.model {_LIVE}
ORDER BY r.playbook_corpus, r.corpora, r.id DESC
"""


async def save(pool: ResilientPool, new: NewRanker) -> RankerSaved:
    """Store a model as the newest version of its (playbook, corpora); 404 naming
    playbook_corpus when that corpus does not exist."""
    params: dict[str, Any] = {f: getattr(new, f) for f in _FIELDS}
    params["cv"] = Jsonb(new.cv)
    async with pool.connection() as conn, conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(INSERT_RANKER, params)
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"playbook_corpus: corpus {new.playbook_corpus!r} not found",
                           field="playbook_corpus")
        await cur.execute(PRUNE_RANKERS, {
            "playbook_corpus": new.playbook_corpus, "playbook_id": row["playbook_id"],
            "corpora": new.corpora, "keep": KEEP_VERSIONS})
    return RankerSaved(id=row["id"], created_at=row["created_at"])


def _stored(row: dict[str, Any]) -> StoredRanker:
    return StoredRanker(**{**row, "corpora": list(row["corpora"]),
                           "features": list(row["features"]), "cv": dict(row["cv"])})


async def list_rankers(pool: ResilientPool, playbook_corpus: str | None,
                       limit: int) -> list[StoredRanker]:
    """The models, newest first, without their trees' text."""
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(LIST_RANKERS, {"playbook_corpus": playbook_corpus, "limit": limit})
        return [_stored(r) for r in await cur.fetchall()]


async def current(pool: ResilientPool) -> list[StoredRanker]:
    """The newest model of every (playbook, corpora), with its trees' text."""
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(CURRENT_RANKERS)
        return [_stored(r) for r in await cur.fetchall()]
