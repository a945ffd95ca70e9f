"""What the corpora take on disk and whether their indexes fit PostgreSQL's shared buffers
(GET /v1/vectors/storage, `lakehouse status`, the gateway's /metrics), and the memory
vectord and PostgreSQL hold now."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import psycopg

from internal.api.responses import CorpusStorage, MemoryHeld, StorageStatus, Warmup
from internal.api.vectord import Corpus
from internal.pg import memory
from internal.vectord.storage.parts import CORPUS_COLUMNS
from internal.vectord.storage.store import Store

SETTINGS = """
SELECT pg_size_bytes(current_setting('shared_buffers')),
       pg_size_bytes(current_setting('effective_cache_size'))"""
# Bytes of each corpus's relations: its table with TOAST, its vector index, its other
# indexes, its lexical side tables with their keys.
SIZES = f"""
SELECT {CORPUS_COLUMNS},
  coalesce(pg_table_size(to_regclass('vectord_items_' || id)), 0) AS table_bytes,
  coalesce(pg_relation_size(to_regclass('vectord_items_' || id || '_hnsw')), 0) AS index_bytes,
  coalesce(pg_indexes_size(to_regclass('vectord_items_' || id)), 0)
    - coalesce(pg_relation_size(to_regclass('vectord_items_' || id || '_hnsw')), 0) AS other_bytes,
  coalesce(pg_total_relation_size(to_regclass('vectord_items_' || id || '_postings')), 0)
    + coalesce(pg_total_relation_size(to_regclass('vectord_items_' || id || '_lexdf')), 0)
    + coalesce(pg_total_relation_size(to_regclass('vectord_items_' || id || '_lexstats')), 0)
    AS lexical_bytes
FROM vectord_corpora ORDER BY name"""
SPACES = """
SELECT coalesce(sum(pg_total_relation_size(to_regclass('vectord_space_' || id))), 0)
FROM vectord_spaces"""
DATA_DIRECTORY = "SELECT current_setting('data_directory')"


async def storage(store: Store, visible: list[str] | None, warmup: Warmup) -> StorageStatus:
    """Every corpus's sizes (those in `visible`, None: all), the server's settings, the
    memory held now."""
    corpora: list[tuple[Corpus, CorpusStorage]] = []
    async with store.pool.connection() as conn:
        cur = await conn.execute(SETTINGS)
        row = await cur.fetchone()
        shared, cache = (int(row[0]), int(row[1])) if row else (0, 0)
        cur = await conn.execute(SIZES)
        names = [d.name for d in cur.description or []]
        for values in await cur.fetchall():
            r = dict(zip(names, values, strict=True))
            sizes = [int(r.pop(k)) for k in ("table_bytes", "index_bytes", "other_bytes",
                                             "lexical_bytes")]
            corpus = Corpus(**r)
            if visible is not None and corpus.name not in visible:
                continue
            try:
                rows = await store.count(conn, corpus)
            except psycopg.errors.UndefinedTable:
                continue  # dropped meanwhile
            corpora.append((corpus, CorpusStorage(
                name=corpus.name, precision=corpus.precision,
                rows=rows, table_bytes=sizes[0], index_bytes=sizes[1],
                other_index_bytes=sizes[2], lexical_bytes=sizes[3],
                index_fits_shared_buffers=sizes[1] <= shared)))
        cur = await conn.execute(SPACES)
        row = await cur.fetchone()
        spaces = int(row[0]) if row else 0
        data_dir = await _data_directory(conn)
    for corpus, c in corpora:
        c.reembed = await store.reembed_progress(corpus)
        c.conversion = await store.convert_progress(corpus)
    return StorageStatus(shared_buffers_bytes=shared, effective_cache_size_bytes=cache,
                         memory=await asyncio.to_thread(held, data_dir), spaces_bytes=spaces,
                         corpora=[c for _, c in corpora], warmup=warmup)


async def _data_directory(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> Path | None:
    try:
        cur = await conn.execute(DATA_DIRECTORY)
        row = await cur.fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    return Path(str(row[0])) if row and row[0] else None


def held(data_dir: Path | None) -> MemoryHeld:
    """vectord's PSS; PostgreSQL's held memory when its postmaster runs on this machine."""
    mine = memory.usage(os.getpid()).pss
    pg = memory.postgres_memory(data_dir) if data_dir is not None else None
    if pg is None:
        return MemoryHeld(vectord_bytes=mine, postgres_bytes=None,
                          postgres_counted="not on this machine (or not readable)")
    return MemoryHeld(vectord_bytes=mine, postgres_bytes=pg.held, postgres_counted=pg.counted)
