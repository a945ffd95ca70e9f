"""An item as stored (GET /v1/vectors/corpora/{name}/items/{id}), I/O-free: what it was
written with, without its vector unless the caller asks for it (`?include=vector`), so a
read of a chunk is not 384 numbers long."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec


class StoredItem(msgspec.Struct, omit_defaults=True):
    """GET .../items/{id}; `vector` only when asked (`?include=vector`)."""

    id: str
    text: str
    title: str | None
    tags: list[str]
    metadata: dict[str, Any]
    language: str | None
    content_hash: str
    updated_at: datetime
    corpus: str = ""
    created_at: datetime | None = None
    vector: list[float] | None = None
