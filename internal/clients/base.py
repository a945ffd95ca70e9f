"""JSON calls from one Lakehouse daemon to another, forwarding the request id."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import msgspec
import structlog

from internal.common.errors import ServiceError, Unavailable, UpstreamTimeout
from internal.common.lsn import LSN_HEADER, REQUEST_LSN, note_written
from internal.common.upstream import Upstream, addresses_of
from internal.common.web import REQUEST_ID_HEADER

_encoder = msgspec.json.Encoder()


def current_request_id() -> str | None:
    """The request id bound by the middleware for the request being served."""
    rid = structlog.contextvars.get_contextvars().get("request_id")
    return rid if isinstance(rid, str) else None


# Methods a lost connection may be retried for on another replica: they change nothing,
# or the same call again leaves the same state. Other calls say so with idempotent=True.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class ServiceClient:
    """Calls one daemon's JSON API; errors come back as Lakehouse exceptions.

    The daemon may be several replicas (a list of base URLs, or an Upstream): each call
    goes to the next address in round-robin order; an address that refuses the
    connection is skipped for `backoff_seconds` and the call moves on (nothing was
    sent). A connection lost mid-call moves on too when the call is idempotent, so a
    replica killed under load costs its in-flight searches nothing.

    - unreachable (every address) -> Unavailable (503) naming the service
    - timed out -> UpstreamTimeout (504)
    - a 4xx/5xx answer -> ServiceError with the daemon's own status, code and message
    """

    def __init__(self, session: aiohttp.ClientSession, base_url: str | Sequence[str] | Upstream,
                 service: str, timeout: float = 30.0, backoff_seconds: float = 5.0,
                 headers: Mapping[str, str] | None = None) -> None:
        self.session = session
        self.service = service
        self.timeout = timeout
        self.upstream = base_url if isinstance(base_url, Upstream) else Upstream(
            service, addresses_of(base_url), backoff_seconds)
        self.base_url = self.upstream.addresses[0]
        # Sent with every call, e.g. the bearer token of the caller mcpd acts for.
        self.headers = dict(headers or {})

    async def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str],
                    timeout: float, idempotent: bool) -> tuple[int, bytes]:
        """(status, body) from the first address that answers."""
        lost = ""
        for address in self.upstream.order():
            try:
                async with self.session.request(
                    method, f"{address}{path}", data=data, headers=headers,
                    timeout=aiohttp.ClientTimeout(total=timeout),
                ) as resp:
                    raw = await resp.read()
                    status = resp.status
                    note_written(resp.headers.get(LSN_HEADER))
            except asyncio.TimeoutError:
                raise UpstreamTimeout(
                    f"{self.service} did not answer {method} {path} in time") from None
            except aiohttp.ClientConnectorError as exc:  # nothing sent: try the next address
                self.upstream.mark_failed(address)
                lost = f"{self.service} unreachable at {address}: {exc}"
                continue
            except aiohttp.ClientConnectionError as exc:  # lost mid-call
                self.upstream.mark_failed(address)
                lost = f"{self.service} at {address} lost the connection: {exc}"
                if idempotent:
                    continue
                raise Unavailable(lost, code=f"{self.service}_unavailable") from None
            self.upstream.mark_ok(address)
            return status, raw
        raise Unavailable(lost or f"{self.service} unavailable",
                          code=f"{self.service}_unavailable")

    async def call(self, method: str, path: str, body: Any = None, *,
                   timeout: float | None = None, idempotent: bool | None = None) -> Any:
        headers = {**self.headers, "Content-Type": "application/json"}
        rid = current_request_id()
        if rid:
            headers[REQUEST_ID_HEADER] = rid
        lsn = REQUEST_LSN.get()
        if lsn:  # the write the caller must see, for every call made on its behalf
            headers[LSN_HEADER] = lsn
        data = _encoder.encode(body) if body is not None else None
        status, raw = await self._send(
            method, path, data, headers, timeout or self.timeout,
            method in _IDEMPOTENT if idempotent is None else idempotent)
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
