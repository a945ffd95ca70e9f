"""Small helpers for vectord tests: unique corpus names and deterministic vectors."""

from __future__ import annotations

import itertools
import os
from typing import Any

import aiohttp
import numpy as np

_seq = itertools.count()


def unique(prefix: str = "t") -> str:
    """A corpus name no other test (or earlier run against the same DB) uses."""
    return f"{prefix}_{os.getpid()}_{next(_seq)}_{np.random.default_rng().integers(1 << 30)}"


def unit(dim: int, seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(dim)
    return [float(x) for x in v / np.linalg.norm(v)]


def item(i: int, dim: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"doc-{i:04d}", "vector": unit(dim, i), "text": f"document number {i}", **extra}


async def call(http: aiohttp.ClientSession, method: str, url: str,
               body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    """One request; returns (status, decoded JSON body)."""
    kwargs: dict[str, Any] = {}
    if raw is not None:
        kwargs["data"] = raw
        kwargs["headers"] = {"Content-Type": "application/json"}
    elif body is not None:
        kwargs["json"] = body
    async with http.request(method, url, **kwargs) as resp:
        return resp.status, await resp.json(content_type=None)


async def make_corpus(http: aiohttp.ClientSession, base: str, dim: int = 8,
                      **extra: Any) -> str:
    name = unique()
    status, body = await call(http, "POST", f"{base}/v1/vectors/corpora",
                              {"name": name, "dim": dim, "language": "english", **extra})
    assert status == 201, body
    return name
