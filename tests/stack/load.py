"""A bounded mixed load of searches and writes over HTTP, recording every answer.

Used by the fault tests (and bench/suite/soak.py): searches are vector searches of
one corpus, writes upsert one new item each; an item counts as acknowledged only when
its upsert answered 200. Loopback only; every loop ends when `stop` is set.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class Answer:
    at: float  # time.monotonic() when it answered
    kind: str  # "search" | "write"
    status: int  # 0: no HTTP answer (connection error)
    code: str  # the error body's code, "" on success
    seconds: float


@dataclass
class Load:
    answers: list[Answer] = field(default_factory=list)
    acked: set[str] = field(default_factory=set)
    # item id -> the Lakehouse-LSN its write answered with (the WAL position after it)
    lsn: dict[str, str] = field(default_factory=dict)

    def of(self, kind: str, since: float = 0.0) -> list[Answer]:
        return [a for a in self.answers if a.kind == kind and a.at >= since]

    def failed(self, kind: str | None = None) -> list[Answer]:
        return [a for a in self.answers if a.status != 200 and kind in (None, a.kind)]


def unit(dim: int, rng: random.Random) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / norm for x in v]


async def _record(load: Load, kind: str, session: aiohttp.ClientSession, url: str,
                  body: dict[str, Any]) -> tuple[int, str]:
    """(status, the answer's Lakehouse-LSN or "")."""
    started = time.monotonic()
    code = lsn = ""
    try:
        async with session.post(url, json=body) as resp:
            status = resp.status
            lsn = resp.headers.get("Lakehouse-LSN", "")
            if status != 200:
                try:
                    code = str((await resp.json())["error"]["code"])
                except (aiohttp.ContentTypeError, KeyError, TypeError, ValueError):
                    code = "?"
            else:
                await resp.read()
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        status, code = 0, type(exc).__name__
    now = time.monotonic()
    load.answers.append(Answer(now, kind, status, code, now - started))
    return status, lsn


async def run(base: str, corpus: str, dim: int, stop: asyncio.Event, *, searchers: int = 4,
              writers: int = 2, search_url: str | None = None, id_prefix: str = "w",
              pause: float = 0.0, timeout: float = 30.0, load: Load | None = None) -> Load:
    """Search and write until `stop` is set; `search_url` overrides the search route."""
    load = load or Load()
    search = search_url or f"{base}/v1/vectors/corpora/{corpus}/search"
    items = f"{base}/v1/vectors/corpora/{corpus}/items"
    counter = itertools.count()
    rng = random.Random(7)

    async def searcher(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            body: dict[str, Any] = {"mode": "vector", "query_vector": unit(dim, rng), "k": 5}
            if search_url is not None:
                body["corpora"] = [corpus]
            await _record(load, "search", session, search, body)
            if pause:
                await asyncio.sleep(pause)

    async def writer(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            item_id = f"{id_prefix}{next(counter)}"
            item = {"id": item_id, "vector": unit(dim, rng), "text": f"item {item_id} of the load"}
            status, lsn = await _record(load, "write", session, items, {"items": [item]})
            if status == 200:
                load.acked.add(item_id)
                load.lsn[item_id] = lsn
            if pause:
                await asyncio.sleep(pause)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        await asyncio.gather(*(searcher(session) for _ in range(searchers)),
                             *(writer(session) for _ in range(writers)))
    return load


async def stored_ids(base: str, corpus: str) -> set[str]:
    """Every id stored in the corpus (keyset pages of /ids)."""
    out: set[str] = set()
    after = ""
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(f"{base}/v1/vectors/corpora/{corpus}/ids",
                                   params={"limit": "10000", "after": after}) as resp:
                assert resp.status == 200, await resp.text()
                page = await resp.json()
            out.update(row["id"] for row in page["items"])
            if page["next_after"] is None:
                return out
            after = page["next_after"]
