"""PostgreSQL as the benchmarks reach past vectord: a corpus's tables, vectors copied in
bulk, a vector table of its own."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import psycopg

TYPES = {"float32": ("vector", ">f4"), "float16": ("halfvec", ">f2")}


def corpus_id(dsn: str, name: str) -> int:
    """A corpus's id in vectord's registry (its tables are vectord_items_<id>, ...)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise SystemExit(f"corpus {name!r} not found")
    return int(row[0])


def vector_table(conn: psycopg.Connection[Any], table: str, precision: str, dim: int) -> None:
    """A table (id bigint, embedding vector/halfvec(dim)) laid out as vectord lays one out."""
    kind, _ = TYPES[precision]
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding {kind}({dim}) NOT NULL)")
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN")


def copy_vectors(conn: psycopg.Connection[Any], table: str, data: np.ndarray[Any, Any],
                 precision: str) -> None:
    """COPY (binary) rows (id = row number, embedding) into table: the rows laid out by
    numpy in PostgreSQL's binary COPY format (vector / halfvec: int16 dim, int16 0, the
    values big-endian), without a Python object per value."""
    dim = data.shape[1]
    _, fmt = TYPES[precision]
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"),
                    ("dim", ">i2"), ("unused", ">i2"), ("v", fmt, (dim,))])
    with conn.cursor().copy(f"COPY {table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        for start in range(0, len(data), 20000):
            block = np.asarray(data[start:start + 20000])
            rows = np.zeros(len(block), dtype=row)
            rows["nf"], rows["l1"], rows["l2"] = 2, 8, 4 + dim * np.dtype(fmt).itemsize
            rows["id"] = np.arange(start, start + len(block))
            rows["dim"], rows["v"] = dim, block
            cp.write(rows.tobytes())
        cp.write(struct.pack(">h", -1))


def hnsw(conn: psycopg.Connection[Any], table: str, name: str, expr: str, m: int = 16,
         efc: int = 64, mwm: str = "1GB") -> None:
    """An HNSW index built as vectord builds one (its memory, two parallel workers)."""
    conn.execute(f"SET maintenance_work_mem = '{mwm}'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    conn.execute(f"CREATE INDEX {name} ON {table} USING hnsw ({expr}) "
                 f"WITH (m = {m}, ef_construction = {efc})")
