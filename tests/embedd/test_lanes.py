"""embedd's lanes with the real local model: a question never waits behind documents.

The bulk load is 2,000 texts in one request (max_texts raised for it); the question is
asked once the bulk lane is busy and documents are queued, and embedd's own timing (the
wait header and GET /v1/embed/lanes) says how long it waited for its model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.api.embedd import INTERACTIVE_PATH, LANE_HEADER, NEAREST_PATH, WAIT_HEADER
from internal.config import Config
from internal.embedd.server import make_app
from tests.helpers import serve, url_of, with_section

BULK = 2000
# The wait is measured from the question's arrival in its lane to the start of its model
# call; between a slice's end and the next call there is one event-loop turn.
LOOP_TURN_MS = 25.0
WORDS = ("boundary layer flow heat transfer shock wave supersonic wing pressure "
         "distribution laminar turbulent jet nozzle mach number plate cylinder").split()


def documents(n: int) -> list[str]:
    rng = random.Random(38)
    return [f"doc {i}: " + " ".join(rng.choices(WORDS, k=rng.randint(20, 160))) for i in range(n)]


async def lanes(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(f"{url}/v1/embed/lanes") as resp:
        assert resp.status == 200
        out: dict[str, Any] = (await resp.json())["models"][0]["lanes"]
        return out


async def question_during_bulk(http: aiohttp.ClientSession, url: str
                               ) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """(the question's wait in ms, the lanes just before it, the lanes just after)."""
    bulk = asyncio.create_task(http.post(f"{url}/v1/embed", json={"texts": documents(BULK)}))
    try:
        for _ in range(600):  # until the bulk lane has run a few slices and holds a queue
            before = await lanes(http, url)
            if before["bulk"]["calls"] >= 4 and before["bulk"]["pending"] > 100:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the bulk request never started: {before}")
        async with http.post(f"{url}{INTERACTIVE_PATH}",
                             json={"texts": ["how does a shock wave meet a boundary layer?"],
                                   "input_type": "query"}) as resp:
            assert resp.status == 200, await resp.text()
            assert resp.headers[LANE_HEADER] == "interactive"
            wait_ms = float(resp.headers[WAIT_HEADER])
        after = await lanes(http, url)
    finally:
        bulk.cancel()  # a closed connection: embedd drops the documents still queued
        await asyncio.gather(bulk, return_exceptions=True)
    return wait_ms, before, after


@contextlib.asynccontextmanager
async def embedd(**changes: Any) -> AsyncIterator[str]:
    """An embedd taking 2,000 texts a request, no cache (every text goes to the model)."""
    server = await serve(make_app(with_section(Config(), "embedd", max_texts=BULK,
                                               cache_size=0, **changes)))
    try:
        yield url_of(server)
    finally:
        await server.close()


@pytest.mark.parametrize("reserved", [1, 0])
async def test_question_waits_at_most_one_bulk_slice(http: aiohttp.ClientSession,
                                                     reserved: int) -> None:
    async with embedd(interactive_workers=reserved) as url:
        wait_ms, before, after = await question_during_bulk(http, url)
    slice_ms = after["bulk"]["call_max_ms"]
    assert before["bulk"]["pending"] > 100  # it was asked behind a queue of documents
    assert after["interactive"]["calls"] == 1 and after["interactive"]["texts"] == 1
    assert wait_ms <= slice_ms + LOOP_TURN_MS, (wait_ms, after)
    assert after["interactive"]["wait_max_ms"] == pytest.approx(wait_ms, abs=0.01)
    # and the documents did not jump the question: they are still queued behind it
    assert after["bulk"]["pending"] > 0


async def test_documents_sent_by_clients_stay_in_the_bulk_lane(
        http: aiohttp.ClientSession) -> None:
    async with embedd() as url:
        async with http.post(f"{url}/v1/embed", json={"texts": ["a question", "or so it says"],
                                                      "input_type": "query"}) as resp:
            assert resp.status == 200 and resp.headers[LANE_HEADER] == "bulk"
        out = await lanes(http, url)
    assert out["interactive"]["calls"] == 0 and out["bulk"]["texts"] == 2


async def test_interactive_route_takes_the_service_token_only(http: aiohttp.ClientSession) -> None:
    cfg = with_section(Config(), "gateway", tokens=("client-token",), service_token="svc-token")
    server = await serve(make_app(cfg))
    url = url_of(server)
    body = {"texts": ["is this urgent?"], "input_type": "query"}
    try:
        client = {"Authorization": "Bearer client-token"}
        async with http.post(f"{url}{INTERACTIVE_PATH}", json=body, headers=client) as resp:
            assert resp.status == 401
            assert (await resp.json())["error"]["code"] == "unauthorized"
        async with http.post(f"{url}/v1/embed", json=body, headers=client) as resp:
            assert resp.status == 200 and resp.headers[LANE_HEADER] == "bulk"
        service = {"Authorization": "Bearer svc-token"}
        async with http.post(f"{url}{INTERACTIVE_PATH}", json=body, headers=service) as resp:
            assert resp.status == 200 and resp.headers[LANE_HEADER] == "interactive"
        nearest = {"query": [1.0] * 384, "groups": [["one passage"]]}
        async with http.post(f"{url}{NEAREST_PATH}", json=nearest, headers=client) as resp:
            assert resp.status == 401
        async with http.post(f"{url}{NEAREST_PATH}", json=nearest, headers=service) as resp:
            assert resp.status == 200 and resp.headers[LANE_HEADER] == "interactive"
    finally:
        await server.close()



async def test_nearest_names_each_groups_most_similar_passage(
        http: aiohttp.ClientSession) -> None:
    """The semantic highlights' route: passages embedded on the interactive lane, each
    group's nearest index back (never the vectors); a bad body is a 400 naming its field."""
    async with embedd() as url:
        async with http.post(f"{url}{INTERACTIVE_PATH}", json={
                "texts": ["when will the lift be repaired?"], "input_type": "query"}) as resp:
            query = (await resp.json())["vectors"][0]
        groups = [["The cafeteria opens at eight.", "The elevator is under repair until May.",
                   "Visitors sign in at reception."],
                  ["Elevator engineers come on Mondays.", "Towels are at the desk."]]
        before = await lanes(http, url)
        async with http.post(f"{url}{NEAREST_PATH}",
                             json={"query": query, "groups": groups}) as resp:
            assert resp.status == 200, await resp.text()
            out = await resp.json()
        assert out["nearest"] == [1, 0] and "vectors" not in out
        after = await lanes(http, url)
        assert after["interactive"]["texts"] - before["interactive"]["texts"] == 5
        assert after["bulk"]["texts"] == before["bulk"]["texts"]
        for body, field in (({"query": query, "groups": [[]]}, "groups[0]"),
                            ({"query": query, "groups": [["a", " "]]}, "groups[0][1]"),
                            ({"query": query[:10], "groups": [["a"]]}, "query"),
                            ({"query": query, "groups": [["a"]], "k": 1}, "k")):
            async with http.post(f"{url}{NEAREST_PATH}", json=body) as resp:
                assert resp.status == 400, body
                assert (await resp.json())["error"]["field"] == field, body
