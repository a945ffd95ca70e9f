"""JSON calls from one Lakehouse daemon to another, forwarding the request id."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import aiohttp
import msgspec
import structlog

from internal.api.responses import ErrorAnswer
from internal.common.auth import outgoing_scope
from internal.common.errors import (
    ServiceError,
    TooManyRequests,
    UpstreamTimeout,
    from_service,
)
from internal.common.lsn import LSN_HEADER, REQUEST_LSN, note_written
from internal.common.priority import PRIORITY, PRIORITY_HEADER
from internal.common.upstream import Upstream, addresses_of, failover
from internal.common.web import REQUEST_ID_HEADER

_encoder = msgspec.json.Encoder()
T = TypeVar("T")
_error_decoder = msgspec.json.Decoder(ErrorAnswer)
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _seconds(retry_after: str | None) -> float | None:
    """A Retry-After of whole seconds (what Lakehouse sends); None for none or a date."""
    try:
        return max(0.0, float(retry_after)) if retry_after else None
    except ValueError:
        return None


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
        # vectord holds every corpus to the caller's scope: the served request's scope goes
        # with each call (internal.common.auth). Other daemons are called as the stack.
        self.forward_scope = service == "vectord"

    async def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str],
                    timeout: float, idempotent: bool) -> tuple[int, bytes, str | None]:
        """(status, body, Retry-After) from the first address that answers."""

        async def send(address: str) -> tuple[int, bytes, str | None]:
            try:
                async with self.session.request(
                    method, f"{address}{path}", data=data, headers=headers,
                    timeout=aiohttp.ClientTimeout(total=timeout),
                ) as resp:
                    raw = await resp.read()
                    note_written(resp.headers.get(LSN_HEADER))
                    return resp.status, raw, resp.headers.get("Retry-After")
            except aiohttp.ConnectionTimeoutError:
                raise  # nothing sent: failover tries the next address
            except asyncio.TimeoutError:
                raise UpstreamTimeout(
                    f"{self.service} did not answer {method} {path} in time") from None

        return await failover(self.upstream, send, retry_lost=idempotent)

    async def call(self, method: str, path: str, body: Any = None, *,
                   timeout: float | None = None, idempotent: bool | None = None) -> Any:
        """The answer as plain JSON (dicts and lists)."""
        raw = await self._answer(method, path, body, timeout, idempotent)
        try:
            return msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            raise ServiceError(502, "upstream_error", f"{self.service} answered non-JSON",
                               service=self.service) from None

    async def call_as(self, response: type[T], method: str, path: str, body: Any = None, *,
                      timeout: float | None = None, idempotent: bool | None = None) -> T:
        """The answer decoded as `response` (a struct of internal.api); 502 if it is not one."""
        raw = await self._answer(method, path, body, timeout, idempotent)
        decoder = _decoders.get(response)
        if decoder is None:  # built once per type (a generic alias is new on each use)
            decoder = _decoders[response] = msgspec.json.Decoder(response)
        try:
            return decoder.decode(raw)  # type: ignore[no-any-return]
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise ServiceError(502, "upstream_error", f"{self.service} answered {method} {path} "
                               f"unexpectedly: {exc}", service=self.service) from None

    async def _answer(self, method: str, path: str, body: Any, timeout: float | None,
                      idempotent: bool | None) -> bytes:
        """The body of a successful answer; an error answer raised as its class."""
        headers = {**self.headers, "Content-Type": "application/json"}
        if self.forward_scope:
            headers.update(outgoing_scope())
        rid = current_request_id()
        if rid:
            headers[REQUEST_ID_HEADER] = rid
        lsn = REQUEST_LSN.get()
        if lsn:  # the write the caller must see, for every call made on its behalf
            headers[LSN_HEADER] = lsn
        priority = PRIORITY.get()
        if priority:  # a light client's search, for every call made on its behalf
            headers[PRIORITY_HEADER] = priority
        data = _encoder.encode(body) if body is not None else None
        status, raw, retry_after = await self._send(
            method, path, data, headers, timeout or self.timeout,
            method in _IDEMPOTENT if idempotent is None else idempotent)
        if status >= 400:
            try:
                err = _error_decoder.decode(raw).error
            except (msgspec.ValidationError, msgspec.DecodeError):
                text = raw[:500].decode("utf-8", "replace")
                raise from_service(status, "upstream_error",
                                   f"{self.service}: HTTP {status}: {text}",
                                   service=self.service) from None
            exc = from_service(status, err.code, err.message, service=self.service,
                               field=err.field)
            if isinstance(exc, TooManyRequests):
                exc.retry_after = _seconds(retry_after)
            raise exc
        return raw
