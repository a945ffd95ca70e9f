"""The names of a corpus's own relations (its items table and its HNSW index), which the
storage and the lexical index both compose statements with."""

from __future__ import annotations

from psycopg import sql


def items_table(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_items_{int(corpus_id)}")


def hnsw_index(corpus_id: int) -> sql.Identifier:
    return sql.Identifier(f"vectord_items_{int(corpus_id)}_hnsw")
