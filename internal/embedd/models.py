"""embedd's request shape (I/O-free, so the gateway's /openapi.json can use it too)."""

from __future__ import annotations

from typing import Literal

import msgspec


class EmbedRequest(msgspec.Struct, forbid_unknown_fields=True):
    texts: list[str]
    model: str | None = None
    input_type: Literal["query", "document"] | None = None  # None: "document"

