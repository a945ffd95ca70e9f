"""`Store`'s search statements: a corpus's vector and keyword searches, a space's shared
index scan, the filter check of the in-memory BM25, the HNSW settings of a connection."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql
from psycopg.rows import dict_row

from internal.api.vectord import Corpus
from internal.common.errors import Unavailable
from internal.vectord import tables
from internal.vectord.lexical import sql_index
from internal.vectord.storage import schema, space_index
from internal.vectord.storage.filters import TRUE, escape_like, is_filtered
from internal.vectord.storage.parts import ITEM_COLUMNS, STALE_REGISTRY_AFTER, Conn, StoreParts

VECTOR_SEARCH = f"""
SELECT {ITEM_COLUMNS}, embedding {{op}} %(q)s AS distance FROM {{table}}
WHERE {{where}} ORDER BY distance LIMIT %(k)s"""

# relaxed_order may return rows slightly out of order: sort them again.
VECTOR_SEARCH_RELAXED = f"""
WITH relaxed AS MATERIALIZED ({VECTOR_SEARCH})
SELECT * FROM relaxed ORDER BY distance"""

# A filtered search's exact plan (docs/decisions/0301-selective-filters-scan-exactly.md):
# the filter's rows read by whatever index serves the filter (at most %(cap)s of them:
# NULL, all), each one's distance computed, the nearest kept; `matched` says how many
# rows were read, so a filter that matched more than the cap is known (the graph answers
# it instead). The CTE is a fence: the HNSW graph is never walked here.
VECTOR_SEARCH_EXACT = f"""
WITH f AS MATERIALIZED (
  SELECT id, embedding {{op}} %(q)s AS distance FROM {{table}} WHERE {{where}} LIMIT %(cap)s),
top AS (SELECT id, distance FROM f ORDER BY distance, id LIMIT %(k)s)
SELECT {sql_index.ITEM_COLUMNS}, top.distance, (SELECT count(*) FROM f) AS matched
FROM top JOIN {{table}} i ON i.id = top.id ORDER BY top.distance, top.id"""

# How many rows the filter matches, as the planner estimates (no row read).
FILTER_ESTIMATE = "EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE {where}"
# An estimate this many times the threshold is trusted (the graph answers without trying
# the exact plan): the planner's row estimates of a filter err by a few times.
ESTIMATE_SLACK = 4

SET_SEARCH = """
SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', %s, false)"""

MATCHING_IDS = "SELECT id FROM {table} WHERE id = ANY(%(match_ids)s::text[]) AND {where}"

# The shared index of an embedding space, over some of its corpora (storage/space_index.py).
# A corpus with ids pending (not in the shared graph yet) makes the statement answer one
# marker row instead of scanning: the search reads the corpora's own graphs.
SPACE_PENDING = """EXISTS (SELECT 1 FROM vectord_space_pending
                           WHERE space_id = %(sid)s AND corpus_id = ANY(%(cids)s))"""

SPACE_SEARCH = f"""
SELECT NULL::bigint AS corpus_id, NULL::text AS id, NULL::float8 AS distance
WHERE {SPACE_PENDING}
UNION ALL
(SELECT corpus_id, id, embedding {{op}} %(q)s AS distance FROM {{table}}
 WHERE corpus_id = ANY(%(cids)s) AND NOT {SPACE_PENDING}
 ORDER BY distance LIMIT %(n)s)"""

# Items per corpus as the planner's statistics say (reltuples; -1 before the first
# ANALYZE): the policy choosing a space's shared index over its corpora's own tables.
CORPUS_SIZES = """
SELECT c.id, c.space_id, coalesce(t.reltuples, -1) FROM vectord_corpora c
LEFT JOIN pg_class t ON t.relname = 'vectord_items_' || c.id
WHERE c.space_id IS NOT NULL"""

SIZES_TTL_SECONDS = 10.0

# An item's id stem: its name without folders, chunk suffix or extension
# (`linux/ss.md#0` -> `ss`), lower-cased.
ID_STEM = r"lower(regexp_replace(regexp_replace(id, '^.*/|#.*$', '', 'g'), '\.[^.]*$', ''))"
TITLE = "lower(coalesce(title, ''))"
# Matches ranked as a person looking up a name expects (Meilisearch's `exactness`, then
# `attribute`): the title or id stem equal to the text, then the text as a whole word
# of the title or id, then as a whole word anywhere, then as a part of a word; newest
# first within each.
# `exactness`: 3 the title or id stem is the text, 2 a whole word of either, 1 a whole word
# of the text, 0 a part of a word.
KEYWORD_SEARCH = f"""
SELECT * FROM (
  SELECT {ITEM_COLUMNS},
         CASE WHEN {TITLE} = %(exact)s OR {ID_STEM} = %(exact)s THEN 3
              WHEN {TITLE} ~ %(word)s OR {ID_STEM} ~ %(word)s THEN 2
              WHEN {{expr}} ~ %(word)s THEN 1 ELSE 0 END AS exactness
  FROM {{table}} WHERE {{expr}} LIKE %(pattern)s AND {{where}}) m
ORDER BY exactness DESC, updated_at DESC, id LIMIT %(k)s"""


class SearchPart(StoreParts):
    """The statements of a search that read a corpus's items table or a space's index."""

    async def vector_search(self, corpus: Corpus, query: npt.NDArray[np.float32], k: int,
                            ef_search: int | None, where: sql.Composable, params: dict[str, Any]
                            ) -> list[dict[str, Any]]:
        """The corpus's k nearest items meeting the filter: by an exact scan of the
        filter's rows when they are few (`exact_cap`), else by its graph, completed
        exactly when the graph's filtered walk found fewer than k (never fewer hits than
        the filter has; with exact_scan_rows 0, the graph's answer as it is)."""
        filtered = is_filtered(where)
        args = {**params, "q": query, "k": k}
        # hnsw returns at most ef_search rows, so it must be at least k.
        ef = max(self.ef_search_of(ef_search, corpus), k)
        async with self.reads.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            cap = await self.exact_cap(conn, corpus, where, params) if filtered else 0
            if cap:
                await cur.execute(vector_exact_sql(corpus, where), {**args, "cap": cap + 1})
                rows = await cur.fetchall()
                if not rows or rows[0]["matched"] <= cap:
                    return _without_matched(rows)
            stmt = vector_search_sql(corpus, where) if filtered else _unfiltered_vector_sql(
                corpus.id, corpus.metric)
            await self.search_settings(conn, ef, filtered)
            await cur.execute(stmt, args)
            rows = await cur.fetchall()
            if filtered and len(rows) < k and self.index_settings(corpus).exact_scan_rows:
                # The walk gave up before k: the rest exactly (0: the graph's answer alone).
                await cur.execute(vector_exact_sql(corpus, where), {**args, "cap": None})
                rows = _without_matched(await cur.fetchall())
            return rows

    def ef_search_of(self, asked: int | None, *corpora: Corpus) -> int:
        """The hnsw.ef_search of a search: the request's, else the largest of the
        corpora's own (each corpus's index settings)."""
        if asked is not None:
            return asked
        return max((self.index_settings(c).ef_search for c in corpora),
                   default=self.cfg.ef_search)

    async def exact_cap(self, conn: Conn, corpus: Corpus, where: sql.Composable,
                        params: dict[str, Any]) -> int:
        """The corpus's `exact_scan_rows` when a filtered vector search of it should try
        the exact plan (the filter's rows, at most that many, scanned: a graph walked
        with a selective filter finds too few of them or misses the nearest;
        docs/decisions/0301-selective-filters-scan-exactly.md); 0 when the graph answers: the threshold is 0,
        or the planner estimates the filter's rows far above it."""
        limit = self.index_settings(corpus).exact_scan_rows
        if limit <= 0:
            return 0
        cur = await conn.execute(sql.SQL(FILTER_ESTIMATE).format(
            table=tables.items_table(corpus.id), where=where), params)
        row = await cur.fetchone()
        plan: Any = row[0] if row else None
        estimate = float(plan[0]["Plan"]["Plan Rows"]) if plan else 0.0
        return 0 if estimate > ESTIMATE_SLACK * limit else limit

    async def space_search(self, space_id: int, metric: str, corpus_ids: list[int],
                           query: npt.NDArray[np.float32], n: int, ef_search: int
                           ) -> list[tuple[int, str, float]] | None:
        """The n nearest of the named corpora in their space's shared index, nearest
        first: (corpus id, item id, distance). One HNSW scan whatever their number.
        None: one of them has changes the shared index has not taken yet."""
        async with self.reads.connection() as conn:
            await self.search_settings(conn, max(ef_search, n), True)
            cur = await conn.execute(_space_search_sql(space_id, metric),
                                     {"q": query, "cids": corpus_ids, "n": n, "sid": space_id})
            raw = await cur.fetchall()
        if any(r[1] is None for r in raw):
            return None
        rows = [(int(r[0]), str(r[1]), float(r[2])) for r in raw]
        rows.sort(key=lambda r: (r[2], r[1], r[0]))  # relaxed_order: sort again
        return rows

    async def space_sizes(self) -> dict[int, dict[int, float]]:
        """space id -> corpus id -> items as PostgreSQL estimates them (-1: not known
        yet), for the corpora attached to a space; cached briefly."""
        now = time.monotonic()
        if now - self._sizes_at < SIZES_TTL_SECONDS:
            return self._sizes
        sizes: dict[int, dict[int, float]] = {}
        try:
            async with asyncio.timeout(STALE_REGISTRY_AFTER if self._sizes and
                                       self.searching_a_replica() else None):
                async with self.registry_reads().connection() as conn:
                    cur = await conn.execute(CORPUS_SIZES)
                    for cid, sid, n in await cur.fetchall():
                        sizes.setdefault(int(sid), {})[int(cid)] = float(n)
        except (Unavailable, TimeoutError):
            if not self._sizes or not self.searching_a_replica():
                raise
            return self._sizes  # estimates: a stale copy serves while the primary hangs
        self._sizes, self._sizes_at = sizes, now
        return sizes

    async def search_settings(self, conn: Conn, ef_search: int, filtered: bool) -> None:
        """Set hnsw.ef_search / hnsw.iterative_scan on a pooled connection for one search.

        Session-level settings, sent only when this connection's differ: most searches are
        then one statement and one round trip. (psycopg's async pipeline mode, the other
        way to save the round trip, burns ~3 ms of CPU.) Every search that reads the HNSW
        index must come through here, or the cache would vouch for stale settings.
        """
        want = (str(ef_search), "relaxed_order" if filtered else "off")
        if self._search_settings.get(conn) != want:
            self._search_settings.pop(conn, None)
            await conn.execute(SET_SEARCH, want)
            self._search_settings[conn] = want

    async def matching_ids(self, corpus: Corpus, ids: list[str], where: sql.Composable,
                           params: dict[str, Any]) -> set[str]:
        """Which of these items meet the filter (the in-memory BM25's filtered search)."""
        stmt = sql.SQL(MATCHING_IDS).format(table=tables.items_table(corpus.id), where=where)
        async with self.reads.connection() as conn:
            cur = await conn.execute(stmt, {**params, "match_ids": ids})
            return {str(r[0]) for r in await cur.fetchall()}

    async def keyword_search(self, corpus: Corpus, text: str, k: int, where: sql.Composable,
                             params: dict[str, Any]) -> list[dict[str, Any]]:
        stmt = sql.SQL(KEYWORD_SEARCH).format(
            table=tables.items_table(corpus.id), expr=schema.KEYWORD_EXPR, where=where)
        lowered = text.lower()
        pattern = "%" + escape_like(lowered) + "%"
        args = {**params, "pattern": pattern, "exact": lowered, "word": whole_word(lowered),
                "k": k}
        async with self.reads.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, args)
            return await cur.fetchall()


def whole_word(text: str) -> str:
    """A PostgreSQL regular expression matching text as a whole word (not inside a longer
    one): every character but a letter or digit escaped."""
    body = "".join(c if c.isalnum() else "\\" + c for c in text)
    return f"(^|[^[:alnum:]_]){body}($|[^[:alnum:]_])"


@functools.lru_cache(maxsize=1024)
def _space_search_sql(space_id: int, metric: str) -> bytes:
    return sql.SQL(SPACE_SEARCH).format(
        op=sql.SQL(schema.OPERATOR[metric]),
        table=space_index.space_table(space_id)).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def _unfiltered_vector_sql(corpus_id: int, metric: str) -> bytes:
    """The unfiltered vector query of a corpus, rendered once (composing costs ~50 us)."""
    return sql.SQL(VECTOR_SEARCH).format(
        op=sql.SQL(schema.OPERATOR[metric]), table=tables.items_table(corpus_id),
        where=TRUE).as_bytes(None)


def _without_matched(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        r.pop("matched", None)
    return rows


def vector_exact_sql(corpus: Corpus, where: sql.Composable) -> sql.Composed:
    """The filtered vector query as an exact scan of the filter's rows."""
    return sql.SQL(VECTOR_SEARCH_EXACT).format(
        op=sql.SQL(schema.OPERATOR[corpus.metric]), table=tables.items_table(corpus.id),
        where=where)


def vector_search_sql(corpus: Corpus, where: sql.Composable) -> sql.Composed:
    """The vector branch's query; a filtered one reads the HNSW index iteratively."""
    template = VECTOR_SEARCH_RELAXED if is_filtered(where) else VECTOR_SEARCH
    return sql.SQL(template).format(
        op=sql.SQL(schema.OPERATOR[corpus.metric]), table=tables.items_table(corpus.id),
        where=where)
