"""What every client of an OpenAI-compatible server here shares (embedd's embeddings,
matrixd's chat completions): where a route is, and the message of an error answer."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


def endpoint(base_url: str, route: str) -> str:
    """{base_url}/{route} when base_url has a path (".../v1", as the OpenAI SDK takes
    it), else {base_url}/v1/{route} (a bare "http://host:port")."""
    base = base_url.rstrip("/")
    if urlsplit(base).path in ("", "/"):
        return f"{base}/v1/{route}"
    return f"{base}/{route}"


def error_message(payload: Any, raw: bytes) -> str:
    """The upstream's own words for an error answer: `error.message` (or `error` as a
    string), else the start of the body."""
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return raw[:500].decode("utf-8", "replace") or "empty answer"
