"""embedd's request shape (I/O-free, in internal.api so the gateway's /openapi.json uses it too)."""

from __future__ import annotations

from typing import Literal

import msgspec


class EmbedRequest(msgspec.Struct, forbid_unknown_fields=True):
    texts: list[str]
    model: str | None = None
    input_type: Literal["query", "document"] | None = None  # None: "document"
