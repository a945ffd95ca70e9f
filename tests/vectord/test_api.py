"""vectord's HTTP API end to end on the real embedded PostgreSQL."""

from __future__ import annotations

import aiohttp
import numpy as np

from internal.common.hashing import content_hash
from tests.vectord.vdata import call, item, make_corpus, unique, unit

C = "/v1/vectors/corpora"


async def test_corpus_lifecycle(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = unique()
    status, body = await call(http, "POST", f"{vectord_url}{C}",
                              {"name": name, "dim": 4, "metric": "l2", "model": "m1"})
    assert status == 201, body
    assert body["name"] == name and body["dim"] == 4 and body["metric"] == "l2"
    assert body["model"] == "m1" and body["count"] == 0
    status, body = await call(http, "GET", f"{vectord_url}{C}")
    assert status == 200
    listed = {c["name"]: c for c in body["corpora"]}
    assert listed[name]["dim"] == 4
    status, body = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert status == 200 and body["metric"] == "l2"
    status, body = await call(http, "DELETE", f"{vectord_url}{C}/{name}")
    assert status == 200 and body == {"deleted": name}
    status, body = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert status == 404 and body["error"]["code"] == "corpus_not_found"


async def test_different_dims_side_by_side(vectord_url: str, http: aiohttp.ClientSession) -> None:
    small = await make_corpus(http, vectord_url, dim=3)
    big = await make_corpus(http, vectord_url, dim=384)
    for name, dim in ((small, 3), (big, 384)):
        status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items",
                                  {"items": [item(i, dim) for i in range(5)]})
        assert status == 200 and body == {"upserted": 5}
        status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                                  {"mode": "vector", "query_vector": unit(dim, 2), "k": 3})
        assert status == 200, body
        assert body["hits"][0]["id"] == "doc-0002"
        assert abs(body["hits"][0]["distance"]) < 1e-5
        assert len(body["hits"]) == 3


async def test_upsert_get_delete_items(vectord_url: str, http: aiohttp.ClientSession) -> None:
    # float32: the vector read back is the one sent, bit for bit (test_precision: float16's)
    name = await make_corpus(http, vectord_url, dim=8, precision="float32")
    it = item(1, 8, title="One", tags=["a", "b"], metadata={"team": "x", "n": 3})
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [it]})
    assert status == 200 and body == {"upserted": 1}
    status, got = await call(http, "GET", f"{vectord_url}{C}/{name}/items/doc-0001?include=vector")
    assert status == 200, got
    assert got["title"] == "One" and got["tags"] == ["a", "b"]
    assert got["metadata"] == {"team": "x", "n": 3} and got["language"] == "english"
    # The hash covers what was sent: no language was given, so none is hashed.
    assert got["content_hash"] == content_hash("One", it["text"], ["a", "b"],
                                               {"team": "x", "n": 3}, it.get("language"))
    assert np.allclose(got["vector"], it["vector"], atol=1e-6)
    first_updated = got["updated_at"]

    # Same content again: idempotent, the row is not rewritten.
    status, _ = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [it]})
    assert status == 200
    _, again = await call(http, "GET", f"{vectord_url}{C}/{name}/items/doc-0001")
    assert again["updated_at"] == first_updated

    # Changed text: updated in place, still one item.
    it2 = {**it, "text": "changed"}
    await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [it2]})
    _, again = await call(http, "GET", f"{vectord_url}{C}/{name}/items/doc-0001")
    assert again["text"] == "changed" and again["updated_at"] > first_updated
    _, corpus = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert corpus["count"] == 1

    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items/delete",
                              {"ids": ["doc-0001", "nope"]})
    assert status == 200 and body == {"deleted": 1}
    status, body = await call(http, "GET", f"{vectord_url}{C}/{name}/items/doc-0001")
    assert status == 404 and body["error"]["code"] == "not_found"


async def test_search_hit_shape(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=8)
    await call(http, "POST", f"{vectord_url}{C}/{name}/items",
               {"items": [item(i, 8, title=f"T{i}", tags=["x"], metadata={"i": i})
                          for i in range(20)]})
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                              {"mode": "vector", "query_vector": unit(8, 7), "k": 5})
    assert status == 200, body
    assert body["corpus"] == name and body["mode"] == "vector" and body["took_ms"] >= 0
    hits = body["hits"]
    assert [h["ranks"]["vector"] for h in hits] == [1, 2, 3, 4, 5]
    top = hits[0]
    assert top["id"] == "doc-0007" and top["title"] == "T7" and top["metadata"] == {"i": 7}
    assert top["tags"] == ["x"] and top["corpus"] == name and top["score"] is None
    assert top["ranks"]["lexical"] is None and top["language"] == "english"
    assert set(top) >= {"id", "corpus", "distance", "score", "ranks", "scores", "text",
                        "title", "tags", "metadata", "language", "updated_at"}
    distances = [h["distance"] for h in hits]
    assert distances == sorted(distances)


async def test_repeated_id_in_batch_last_wins(vectord_url: str,
                                              http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    batch = [item(1, 4, text="first"), item(2, 4), item(1, 4, text="second")]
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": batch})
    assert status == 200, body
    _, got = await call(http, "GET", f"{vectord_url}{C}/{name}/items/doc-0001")
    assert got["text"] == "second"
    _, corpus = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert corpus["count"] == 2
