"""internal.clients.vectord against the real server: the contract other daemons rely on."""

from __future__ import annotations

import aiohttp
import pytest

from internal.api.vectord import Hit, MultiSearchRequest, MultiSearchResponse, SearchRequest
from internal.clients.vectord import VectordClient
from internal.common.errors import InvalidArgument, ServiceError
from tests.vectord.vdata import item, unique, unit


async def test_client_round_trip(vectord_url: str, http: aiohttp.ClientSession) -> None:
    client = VectordClient(http, vectord_url)
    name = unique("client")
    created = await client.create_corpus(name, 8, metric="ip", language="english",
                                         model="m", defer_index=True)
    assert created.metric == "ip" and created.language == "english"
    assert await client.upsert(name, [item(i, 8) for i in range(30)], model="m") == 30
    query = SearchRequest(mode="vector", query_vector=unit(8, 4), k=3)
    before = await client.search(name, query)
    built = await client.build_index(name)
    assert built.corpus == name and built.index == "hnsw" and built.seconds >= 0
    await client.build_index(name)  # idempotent
    after = await client.search(name, query)
    assert [h.id for h in after.hits] == [h.id for h in before.hits]
    assert after.hits[0].id == "doc-0004"
    # <#>: -inner product, of the float16-rounded stored vector (the default precision)
    assert after.hits[0].distance == pytest.approx(-1.0, abs=1e-3)
    ids = [row.id async for row in client.iter_ids(name, prefix="doc-001", page=4)]
    assert ids == [f"doc-001{i}" for i in range(10)]
    assert (await client.get_item(name, "doc-0003")).text == "document number 3"
    assert await client.delete_items(name, ["doc-0003"]) == 1
    assert (await client.get_corpus(name)).count == 29
    assert name in [c.name for c in await client.list_corpora()]
    await client.delete_corpus(name)
    with pytest.raises(ServiceError) as info:
        await client.get_corpus(name)
    assert info.value.status == 404 and info.value.code == "corpus_not_found"


async def test_search_answers_decode_strictly(vectord_url: str, http: aiohttp.ClientSession
                                              ) -> None:
    """The search travels typed both ways: the request is vectord's struct, the answer is
    decoded into `Hit` structs; an answer that is not one is a 502 naming the route, and
    a request out of range is vectord's own 400 (the sender built it, vectord checks it)."""
    client = VectordClient(http, vectord_url)
    name = unique("typed")
    await client.create_corpus(name, 8)
    await client.upsert(name, [item(i, 8) for i in range(5)])
    out = await client.search_many(MultiSearchRequest(corpora=[name], mode="vector",
                                                      query_vector=unit(8, 1), k=2), Hit)
    assert [type(h) for h in out.hits] == [Hit, Hit] and out.hits[0].id == "doc-0001"
    with pytest.raises(InvalidArgument) as info:
        await client.search_many(MultiSearchRequest(corpora=[name], mode="vector",
                                                    query_vector=unit(8, 1), rrf_k=100_001), Hit)
    assert info.value.field == "rrf_k" and isinstance(info.value, ServiceError)
    with pytest.raises(ServiceError) as bad:  # the corpus list's answer is no search's
        await client.call_as(MultiSearchResponse, "GET", "/v1/vectors/corpora")
    assert bad.value.status == 502 and bad.value.code == "upstream_error"
    await client.delete_corpus(name)
