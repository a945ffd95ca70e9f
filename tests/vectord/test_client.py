"""internal.clients.vectord against the real server: the contract other daemons rely on."""

from __future__ import annotations

import aiohttp
import pytest

from internal.clients.vectord import VectordClient
from internal.common.errors import InvalidArgument, ServiceError
from tests.vectord.vdata import item, unique, unit


async def test_client_round_trip(vectord_url: str, http: aiohttp.ClientSession) -> None:
    client = VectordClient(http, vectord_url)
    name = unique("client")
    created = await client.create_corpus(name, 8, metric="ip", language="english",
                                         model="m", defer_index=True)
    assert created["metric"] == "ip" and created["language"] == "english"
    assert await client.upsert(name, [item(i, 8) for i in range(30)], model="m") == 30
    before = await client.search(name, {"mode": "vector", "query_vector": unit(8, 4), "k": 3})
    built = await client.build_index(name)
    assert built["index"] == "hnsw" and built["seconds"] >= 0
    await client.build_index(name)  # idempotent
    after = await client.search(name, {"mode": "vector", "query_vector": unit(8, 4), "k": 3})
    assert [h["id"] for h in after["hits"]] == [h["id"] for h in before["hits"]]
    assert after["hits"][0]["id"] == "doc-0004"
    assert after["hits"][0]["distance"] == pytest.approx(-1.0, abs=1e-5)  # <#>: -inner product
    ids = [row["id"] async for row in client.iter_ids(name, prefix="doc-001", page=4)]
    assert ids == [f"doc-001{i}" for i in range(10)]
    assert (await client.get_item(name, "doc-0003"))["text"] == "document number 3"
    assert await client.delete_items(name, ["doc-0003"]) == 1
    assert (await client.get_corpus(name))["count"] == 29
    assert name in [c["name"] for c in await client.list_corpora()]
    await client.delete_corpus(name)
    with pytest.raises(ServiceError) as info:
        await client.get_corpus(name)
    assert info.value.status == 404 and info.value.code == "not_found"


async def test_search_travels_typed(http: aiohttp.ClientSession) -> None:
    """The body is converted to vectord's request struct before it is sent: a field vectord
    does not take, or a value out of its range, is refused at the sender (no vectord at
    this address: nothing was sent) with the error vectord's 400 would have raised."""
    client = VectordClient(http, "http://127.0.0.1:9")
    for body, field in (({"mode": "vector", "query_vector": [1.0], "kk": 3}, "kk"),
                        ({"mode": "vector", "query_vector": [1.0], "rrf_k": 100_001}, "rrf_k")):
        with pytest.raises(InvalidArgument) as info:
            await client.search_many(["a"], body)
        assert info.value.status == 400 and isinstance(info.value, ServiceError)
        assert info.value.field == field and info.value.service == "vectord"
    with pytest.raises(InvalidArgument) as one:
        await client.search("a", {"mode": "nearest"})
    assert one.value.field == "mode"
