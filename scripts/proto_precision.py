"""A corpus's vectors rewritten in another precision, straight in PostgreSQL (a prototype).

What a corpus created with `"precision": "float16"` would hold: its items table's
`embedding` column as halfvec(dim) and its HNSW index over it with the halfvec operator
class (and back to vector(dim) for float32). vectord's statements work unchanged on
either: a query vector sent as `vector` is cast to halfvec implicitly (pgvector declares
that cast IMPLICIT), so `embedding <=> $1` resolves to halfvec's operator and its index.
Used by the benchmarks that measure float16 before vectord creates such corpora."""

from __future__ import annotations

import time
from typing import Any

import psycopg

TYPES = {"float32": "vector", "float16": "halfvec"}
OPS = {"cosine": "cosine", "l2": "l2", "ip": "ip"}
M, EF_CONSTRUCTION = 16, 64  # vectord's defaults ([vectord] hnsw_m, hnsw_ef_construction)


def corpus(conn: psycopg.Connection[Any], name: str) -> tuple[int, int, str]:
    """(id, dim, metric) of a corpus in vectord's registry."""
    row = conn.execute("SELECT id, dim, metric FROM vectord_corpora WHERE name = %s",
                       (name,)).fetchone()
    if row is None:
        raise SystemExit(f"corpus {name!r} not found")
    return int(row[0]), int(row[1]), str(row[2])


def precision(conn: psycopg.Connection[Any], corpus_id: int) -> str:
    """float32 or float16: the type of the corpus's embedding column now."""
    row = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                       "WHERE attrelid = %s::regclass AND attname = 'embedding'",
                       (f"vectord_items_{corpus_id}",)).fetchone()
    assert row is not None
    return "float16" if str(row[0]).startswith("halfvec") else "float32"


def rewrite(dsn: str, name: str, to: str, *, build: bool = True) -> tuple[float, float]:
    """The corpus's column (and, when build, its HNSW index) in precision `to`; seconds
    of the rewrite and of the index build. A corpus already there is left alone."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cid, dim, metric = corpus(conn, name)
        if precision(conn, cid) == to:
            return 0.0, 0.0
        t, kind = f"vectord_items_{cid}", TYPES[to]
        started = time.perf_counter()
        conn.execute(f"DROP INDEX IF EXISTS {t}_hnsw")  # ALTER TYPE would rebuild it with the old class
        conn.execute(f"ALTER TABLE {t} ALTER COLUMN embedding TYPE {kind}({dim}) "
                     f"USING embedding::{kind}({dim})")
        conn.execute(f"ALTER TABLE {t} ALTER COLUMN embedding SET STORAGE MAIN")  # as vectord lays it out
        rewritten = time.perf_counter()
        if build:
            conn.execute("SET maintenance_work_mem = '1GB'")  # as vectord's build_index
            conn.execute("SET max_parallel_maintenance_workers = 2")
            conn.execute(f"CREATE INDEX {t}_hnsw ON {t} USING hnsw (embedding {kind}_{OPS[metric]}_ops) "
                         f"WITH (m = {M}, ef_construction = {EF_CONSTRUCTION})")
        conn.execute(f"VACUUM ANALYZE {t}")
        return rewritten - started, time.perf_counter() - rewritten
