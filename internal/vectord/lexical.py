"""Lexical (BM25) search inside PostgreSQL: per-corpus tsvector, statistics, ranking."""

from __future__ import annotations

import psycopg
from psycopg import sql


async def install_corpus(conn: psycopg.AsyncConnection, table: sql.Identifier,
                         corpus_id: int) -> None:
    """Add the lexical column, index and BM25 statistics to a new corpus's items table.

    Called inside the create-corpus transaction, after the items table exists.
    """
    return None


async def drop_corpus(conn: psycopg.AsyncConnection, corpus_id: int) -> None:
    """Drop the lexical side tables of a corpus; call in the delete-corpus transaction."""
    return None
