"""What matrixd's handlers and its search policy share: config and the daemon clients."""

from __future__ import annotations

from dataclasses import dataclass, field

from internal.api.vectord import Space
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import MatrixdConfig


@dataclass
class Deps:
    cfg: MatrixdConfig
    vectord: VectordClient
    embed: EmbedClient | None
    # vectord's embedding spaces as last read, and when (time.monotonic; matrixd.spaces).
    spaces: list[Space] = field(default_factory=list)
    spaces_at: float = float("-inf")
