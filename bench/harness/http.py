"""JSON over HTTP as the benchmarks send it: a failed call stops the run with its answer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

CORPORA = "/v1/vectors/corpora"


async def call(http: aiohttp.ClientSession, method: str, url: str, body: Any = None,
               ok: tuple[int, ...] = ()) -> Any:
    """The JSON answer; a status >= 400 not in `ok` ends the benchmark."""
    async with http.request(method, url, json=body) as r:
        raw = await r.read()
        if r.status >= 400 and r.status not in ok:
            raise SystemExit(f"{method} {url}: {r.status} {raw[:2000]!r}")
        return await r.json(content_type=None) if raw else None


async def post(http: aiohttp.ClientSession, url: str, body: Any = None,
               ok: tuple[int, ...] = ()) -> Any:
    return await call(http, "POST", url, body, ok)


async def search(http: aiohttp.ClientSession, base: str, body: dict[str, Any]) -> bytes:
    """POST /v1/matrix/search; the answer's bytes (a status other than 200 ends the run)."""
    async with http.post(f"{base}/v1/matrix/search", json=body) as r:
        raw = await r.read()
        if r.status != 200:
            raise SystemExit(f"search answered {r.status}: {raw[:2000]!r}")
        return raw


def session(concurrency: int = 16, timeout: float = 3600) -> aiohttp.ClientSession:
    """A client session with room for `concurrency` requests in flight."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency * 2),
                                 timeout=aiohttp.ClientTimeout(total=timeout))


async def profiled(http: aiohttp.ClientSession, base: str, names: list[str],
                   timeout: float = 1800) -> None:
    """Wait until vectord has built each corpus's profile since its last write and
    description (in the background: a timing must not share the cores with it); a
    checkout without profiles (404 on the route) has none to wait for."""
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            async with http.get(f"{base}{CORPORA}/{name}/profile") as r:
                if r.status == 404:
                    return
                out = await r.json()
            if r.status == 200 and out.get("current"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the profile of {name} was not built: {r.status} {out}")
            await asyncio.sleep(1.0)
