"""lakehouse.AsyncClient against the real stack: one session, concurrent calls, errors."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

import lakehouse
from lakehouse import types
from tests.client.conftest import Live


async def test_concurrent_searches_share_one_session(aclient: lakehouse.AsyncClient) -> None:
    questions = ["printer jams after new toner", "VPN drops at home", "guest wifi password"]
    answers = await asyncio.gather(*(aclient.search(q, corpora=["handbook", "tickets"], k=2)
                                     for q in questions))
    assert [a.hits[0].id for a in answers] == ["T-1042#0", "T-1043#0", "T-1045#0"]
    assert [a.hits[0].document_id for a in answers] == ["T-1042", "T-1043", "T-1045"]
    assert all(isinstance(h, types.MatrixHit) for a in answers for h in a.hits)


async def test_iterate_ids_and_items(aclient: lakehouse.AsyncClient) -> None:
    ids = [row.id async for row in aclient.iter_ids("tickets", page_size=2)]
    assert ids == ["T-1042#0", "T-1043#0", "T-1044#0", "T-1045#0", "T-1046#0"]
    items = [item async for item in aclient.iter_items("tickets", prefix="T-104")]
    assert [i.id for i in items] == ids and all(i.vector is None for i in items)
    items = [item async for item in aclient.iter_items("tickets", prefix="T-104", vector=True)]
    assert all(i.vector is not None and len(i.vector) == 384 for i in items)


async def test_errors_and_close(live: Live) -> None:
    client = lakehouse.AsyncClient(live.url, live.token)
    with pytest.raises(lakehouse.NotFound) as missing:
        await client.get_item("tickets", "T-9999")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert missing.value.request_id
    await client.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await client.list_corpora()


async def test_a_session_of_the_callers_is_used_and_left_open(live: Live) -> None:
    async with aiohttp.ClientSession() as session:
        client = lakehouse.AsyncClient(live.url, live.token, session=session)
        assert {"handbook", "tickets"} <= {c.name for c in await client.list_corpora()}
        await client.aclose()
        assert not session.closed  # its owner closes it
        async with lakehouse.AsyncClient(live.url, live.token, session=session) as again:
            assert (await again.get_corpus("tickets")).count > 0
