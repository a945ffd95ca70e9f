"""What matrixd's handlers and its search policy share: config and the daemon clients."""

from __future__ import annotations

from dataclasses import dataclass

from internal.config import MatrixdConfig
from internal.embed.client import EmbedClient
from internal.vectord.client import VectordClient


@dataclass
class Deps:
    cfg: MatrixdConfig
    vectord: VectordClient
    embed: EmbedClient | None
