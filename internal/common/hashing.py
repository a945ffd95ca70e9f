"""Content fingerprints shared by vectord, the wiki sync and `lakehouse ingest`."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder(order="sorted")


def content_hash(title: str | None, text: str, tags: list[str] | tuple[str, ...] | None,
                 metadata: dict[str, Any] | None, language: str | None = None) -> str:
    """sha256 over what an item says (not its vector): equal hash, equal content."""
    payload = _encoder.encode([title or "", text, list(tags or []), metadata or {}, language or ""])
    return hashlib.sha256(payload).hexdigest()
