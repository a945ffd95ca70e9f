"""Where a system's memory goes: processes (PSS, split anon / shared memory / file), the
relations of a PostgreSQL database, and the page cache its files hold.

PSS counts a page shared by n processes as 1/n in each, so the PSS of every process of a
system adds up to what it holds without counting PostgreSQL's shared buffers once per
backend (RSS would). The page cache is in no process's PSS: it is reported on its own."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

import psycopg

from internal.pg import memory
from internal.pg.memory import PgMemory, Usage, page_cache, usage

__all__ = ["MIB", "PgMemory", "Usage", "disk", "drop_page_cache", "page_cache", "postgres_memory",
           "relations", "settings", "usage"]
MIB = 2**20


def postgres_memory(data_dir: Path) -> PgMemory:
    """Every process of the postmaster running in data_dir, grouped by role."""
    got = memory.postgres_memory(data_dir)
    if got is None:
        raise SystemExit(f"no postmaster runs in {data_dir}")
    return got


def disk(path: Path) -> int:
    """Bytes used under path (du's apparent size would count holes)."""
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.stdout else 0


RELATIONS = """
SELECT CASE
         WHEN c.relname ~ '^vectord_items_[0-9]+$' THEN 'items heap + TOAST'
         WHEN c.relname ~ '^vectord_items_[0-9]+_hnsw' THEN 'items HNSW index'
         WHEN c.relname ~ '^vectord_items_[0-9]+_' AND c.relkind = 'i' THEN 'items other indexes'
         WHEN c.relname ~ '^vectord_space_[0-9]+_hnsw' THEN 'space HNSW index'
         WHEN c.relname ~ '^vectord_space_[0-9]+' THEN 'space table (+ key)'
         WHEN c.relname ~ 'postings' THEN 'lexical postings (+ key)'
         WHEN c.relname ~ '^vectord_lex' OR c.relname ~ '_lex' THEN 'lexical df / stats'
         WHEN n.nspname IN ('pg_catalog', 'information_schema', 'pg_toast') THEN 'catalog'
         ELSE 'other' END AS part,
       sum(CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'i', 'm') AND n.nspname NOT LIKE 'pg_temp%'
GROUP BY 1 ORDER BY 2 DESC"""


def relations(dsn: str) -> list[tuple[str, int]]:
    """Bytes on disk of each kind of relation in the database (tables with their TOAST)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [(str(r[0]), int(r[1])) for r in conn.execute(RELATIONS).fetchall()]


def settings(dsn: str, names: Iterable[str]) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def total(pids: Iterable[int]) -> Usage:
    out = Usage()
    for pid in pids:
        out.add(usage(pid))
    return out


def drop_page_cache(data_dir: Path) -> int:
    """Every file of data_dir out of the page cache (a cold start's disk); the bytes still
    cached after."""
    for f in data_dir.rglob("*"):
        if f.is_file() and not f.is_symlink():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    return page_cache([data_dir])
