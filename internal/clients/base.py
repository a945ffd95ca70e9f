"""JSON calls from one Lakehouse daemon to another, forwarding the request id."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp
import msgspec
import structlog

from internal.common.errors import ServiceError, Unavailable, UpstreamTimeout
from internal.common.web import REQUEST_ID_HEADER

_encoder = msgspec.json.Encoder()


def current_request_id() -> str | None:
    """The request id bound by the middleware for the request being served."""
    rid = structlog.contextvars.get_contextvars().get("request_id")
    return rid if isinstance(rid, str) else None


class ServiceClient:
    """Calls one daemon's JSON API; errors come back as Lakehouse exceptions.

    - unreachable -> Unavailable (503) naming the service
    - timed out -> UpstreamTimeout (504)
    - a 4xx/5xx answer -> ServiceError with the daemon's own status, code and message
    """

    def __init__(self, session: aiohttp.ClientSession, base_url: str, service: str,
                 timeout: float = 30.0, headers: Mapping[str, str] | None = None) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.service = service
        self.timeout = timeout
        # Sent with every call, e.g. the bearer token of the caller mcpd acts for.
        self.headers = dict(headers or {})

    async def call(self, method: str, path: str, body: Any = None, *,
                   timeout: float | None = None) -> Any:
        headers = {**self.headers, "Content-Type": "application/json"}
        rid = current_request_id()
        if rid:
            headers[REQUEST_ID_HEADER] = rid
        data = _encoder.encode(body) if body is not None else None
        url = f"{self.base_url}{path}"
        try:
            async with self.session.request(
                method, url, data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self.timeout),
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"{self.service} did not answer {method} {path} in time") from None
        except aiohttp.ClientConnectionError as exc:
            raise Unavailable(f"{self.service} unreachable at {self.base_url}: {exc}",
                              code=f"{self.service}_unavailable") from None
        try:
            payload = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            payload = None
        if status >= 400:
            err = payload.get("error") if isinstance(payload, dict) else None
            if isinstance(err, dict):
                raise ServiceError(status, str(err.get("code", "error")),
                                   str(err.get("message", "")), service=self.service,
                                   field=err.get("field"))
            text = raw[:500].decode("utf-8", "replace")
            raise ServiceError(status, "upstream_error", f"{self.service}: HTTP {status}: {text}",
                               service=self.service)
        if payload is None and raw:
            raise ServiceError(502, "upstream_error", f"{self.service} answered non-JSON",
                               service=self.service)
        return payload
