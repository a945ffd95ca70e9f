"""The shared pool: hottest connection first, jsonb decoded exactly as the stdlib would."""

from __future__ import annotations

import json

import pytest

from internal.pg.pool import loads_json, make_pool
from internal.vectord.storage import schema


@pytest.fixture
async def dsn(pg_dsn: str) -> str:
    await schema.migrate(pg_dsn)  # the pool's connections need the vector extension
    return pg_dsn


async def test_pool_hands_out_the_most_recently_returned_connection(dsn: str) -> None:
    pool = make_pool(dsn, 3, 3)
    await pool.open(wait=True)
    try:
        pids = []
        for _ in range(6):  # one at a time: a FIFO pool would cycle through all three
            async with pool.connection() as conn:
                pids.append(conn.info.backend_pid)
        assert len(set(pids)) == 1
        async with pool.connection() as a, pool.connection() as b:
            assert a.info.backend_pid != b.info.backend_pid  # still a pool of three
    finally:
        await pool.close()


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": [true, null, "x"], "c": {"d": 1.5}}',
    '{"big": 123456789012345678901234567890}',
    '{"tiny": 1e-400}',  # msgspec refuses it; the stdlib fallback takes it
    '"\\u0000x"',
])
def test_loads_json_matches_the_stdlib(text: str) -> None:
    assert loads_json(text.encode()) == json.loads(text)


async def test_jsonb_columns_come_back_decoded(dsn: str) -> None:
    pool = make_pool(dsn, 1, 1)
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT '{\"n\": 1e-400, \"s\": \"é\"}'::jsonb, '[1,2]'::json")
            row = await cur.fetchone()
        assert row is not None
        assert row[0] == {"n": json.loads("1e-400"), "s": "é"}
        assert row[1] == [1, 2]
    finally:
        await pool.close()
