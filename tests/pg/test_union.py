"""Statements of one part per corpus, run with `$n` placeholders converted once."""

from __future__ import annotations

import psycopg
import pytest

from internal.pg import union


def test_parts_are_joined_and_their_names_numbered_in_order_of_first_use() -> None:
    parts = (b"(SELECT 1 AS c, x FROM t1 WHERE x = ANY(%(a)s) AND y = %(shared)s)",
             b"(SELECT 2 AS c, x FROM t2 WHERE x = ANY(%(b)s) AND y = %(shared)s "
             b"AND z LIKE 'p%%')")
    query, names = union.statement(parts)
    assert names == ("a", "shared", "b")
    assert query == (b"(SELECT 1 AS c, x FROM t1 WHERE x = ANY($1) AND y = $2) UNION ALL "
                     b"(SELECT 2 AS c, x FROM t2 WHERE x = ANY($3) AND y = $2 "
                     b"AND z LIKE 'p%')")
    assert union.statement(parts) is union.statement(parts)  # converted once


def test_a_positional_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match="name it"):
        union.statement((b"SELECT %s",))


async def test_rows_and_types_are_those_of_the_named_statement(pg_dsn: str) -> None:
    parts = [b"(SELECT 1 AS part, v FROM unnest(%(a)s::text[]) AS v)",
             b"(SELECT 2 AS part, v FROM unnest(%(b)s::text[]) AS v WHERE v LIKE %(p)s)"]
    params = {"a": ["x", "y"], "b": ["pa", "qb", "pc"], "p": "p%"}
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        got = await union.fetch(conn, parts, params)
        cur = await conn.execute(b" UNION ALL ".join(parts), params)
        assert got == await cur.fetchall()
        assert sorted(got) == [(1, "x"), (1, "y"), (2, "pa"), (2, "pc")]
        binary = await union.fetch(conn, parts, params, binary=True)
        assert sorted(binary) == sorted(got)
