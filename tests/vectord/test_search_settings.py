"""HNSW session settings stay true to the per-connection cache across search modes."""

from __future__ import annotations

import aiohttp

from internal.config import Config
from internal.vectord.server import STORE, make_app
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, item, unique, unit

C = "/v1/vectors/corpora"


async def test_hybrid_then_vector_search_on_one_connection(base_cfg: Config,
                                                           http: aiohttp.ClientSession) -> None:
    # One pooled connection, so every search below runs on it.
    app = make_app(with_section(base_cfg, "vectord", pool_min=1, pool_max=1))
    server = await serve(app)
    base = url_of(server)
    try:
        name = unique("settings")
        assert (await call(http, "POST", f"{base}{C}", {"name": name, "dim": 8,
                                                         "language": "english"}))[0] == 201
        items = [item(i, 8, metadata={"even": i % 2 == 0}) for i in range(20)]
        assert (await call(http, "POST", f"{base}{C}/{name}/items", {"items": items}))[0] == 200
        vector = {"mode": "vector", "query_vector": unit(8, 3), "k": 5}
        assert (await call(http, "POST", f"{base}{C}/{name}/search", vector))[0] == 200
        # A filtered hybrid search reads the index iteratively (relaxed order) ...
        status, _ = await call(http, "POST", f"{base}{C}/{name}/search", {
            "mode": "hybrid", "query_text": "document", "query_vector": unit(8, 3),
            "filter": {"metadata": {"even": True}}})
        assert status == 200
        # ... and an unfiltered vector search afterwards must not inherit that.
        status, body = await call(http, "POST", f"{base}{C}/{name}/search", vector)
        assert status == 200 and len(body["hits"]) == 5
        distances = [h["distance"] for h in body["hits"]]
        assert distances == sorted(distances)
        async with app[STORE].pool.connection() as conn:
            cur = await conn.execute("SELECT current_setting('hnsw.iterative_scan')")
            row = await cur.fetchone()
        assert row is not None and row[0] == "off"
    finally:
        await server.close()
