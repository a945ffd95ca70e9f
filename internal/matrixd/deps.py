"""What matrixd's handlers and its search policy share: config and the daemon clients."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from internal.api.ranker import StoredRanker
from internal.api.vectord import Space
from internal.clients.embed import EmbedClient, Embedding
from internal.clients.vectord import VectordClient
from internal.common.errors import Unavailable
from internal.config import MatrixdConfig


@dataclass
class RankerCache:
    """The learned ranker's current models as last read from vectord, and their loaded
    trees (internal.matrixd.ranker.serve keeps it)."""

    current: list[StoredRanker] = field(default_factory=list)
    boosters: dict[int, Any] = field(default_factory=dict)  # model id -> lightgbm.Booster
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None  # the last read's failure (the models read before stay)


@dataclass
class Deps:
    cfg: MatrixdConfig
    vectord: VectordClient
    embed: EmbedClient | None
    # vectord's embedding spaces as last read, and when (time.monotonic; matrixd.spaces).
    spaces: list[Space] = field(default_factory=list)
    spaces_at: float = float("-inf")
    rankers: RankerCache = field(default_factory=RankerCache)
    # Playbook corpora vectord answered 404 for, and when (time.monotonic; matrixd.playbook).
    playbooks_absent: dict[str, float] = field(default_factory=dict)


async def embed_query(deps: Deps, text: str) -> Embedding:
    """The query embedded by the default model (503 when embedd is not configured)."""
    if deps.embed is None:
        raise Unavailable("embedd is not configured ([matrixd] embedd_url is empty)",
                          code="embedd_unavailable")
    return await deps.embed.embed([text], input_type="query", interactive=True)
