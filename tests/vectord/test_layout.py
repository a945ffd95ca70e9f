"""The items tables' row layout (schema.layout_sql): embeddings in the row, lexemes out."""

from __future__ import annotations

import aiohttp
import psycopg

from internal.config import Config
from internal.vectord.server import make_app
from internal.vectord.storage import schema
from tests.helpers import serve, url_of
from tests.vectord.vdata import call, item, unique

C = "/v1/vectors/corpora"

LAYOUT = """
SELECT (SELECT attstorage FROM pg_attribute WHERE attrelid = c.oid AND attname = 'embedding'),
       (SELECT attstorage FROM pg_attribute WHERE attrelid = c.oid AND attname = 'lex'),
       c.reloptions
FROM pg_class c JOIN vectord_corpora v ON c.relname = 'vectord_items_' || v.id
WHERE v.name = %s"""


async def layout_of(pg_dsn: str, name: str) -> tuple[str, str, list[str] | None]:
    """(embedding's attstorage, lex's, the table's reloptions) of a corpus's items table."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        cur = await conn.execute(LAYOUT, (name,))
        row = await cur.fetchone()
    assert row is not None
    return row[0], row[1], row[2]


async def test_new_corpus_keeps_embeddings_in_the_row_and_old_ones_are_migrated(
        base_cfg: Config, pg_dsn: str, http: aiohttp.ClientSession) -> None:
    server = await serve(make_app(base_cfg))
    try:
        base = url_of(server)
        name = unique("layout")
        assert (await call(http, "POST", f"{base}{C}", {"name": name, "dim": 8}))[0] == 201
        assert (await call(http, "POST", f"{base}{C}/{name}/items",
                           {"items": [item(i, 8) for i in range(5)]}))[0] == 200
    finally:
        await server.close()
    # MAIN: in the row; EXTERNAL: out of it, uncompressed.
    target = f"toast_tuple_target={schema.TOAST_TARGET}"
    assert await layout_of(pg_dsn, name) == ("m", "e", [target])
    # A table of the layout before (PostgreSQL's defaults) is migrated on start.
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (name,))
        row = await cur.fetchone()
        assert row is not None
        t = f"vectord_items_{int(row[0])}"
        await conn.execute(f"ALTER TABLE {t} ALTER COLUMN embedding SET STORAGE EXTERNAL, "
                           f"ALTER COLUMN lex SET STORAGE EXTENDED, RESET (toast_tuple_target)")
        await conn.execute("DELETE FROM schema_migrations WHERE component = 'vectord' "
                           "AND version >= 6")
    assert await layout_of(pg_dsn, name) == ("e", "x", None)
    server = await serve(make_app(base_cfg))
    try:
        status, body = await call(http, "POST", f"{url_of(server)}{C}/{name}/search",
                                  {"mode": "hybrid", "query_text": "document",
                                   "query_vector": item(0, 8)["vector"], "k": 5})
        assert status == 200 and len(body["hits"]) == 5
    finally:
        await server.close()
    assert await layout_of(pg_dsn, name) == ("m", "e", [target])
