"""Reverse proxy to one upstream daemon: bodies streamed both ways, never buffered whole."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import structlog
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from internal.common.access import SCOPE_HEADER
from internal.common.access import encode as encode_scope
from internal.common.errors import PayloadTooLarge, RequestTimeout, Unavailable, UpstreamTimeout
from internal.common.priority import LIGHT, PRIORITY_HEADER
from internal.common.upstream import Upstream, failover
from internal.common.web import REQUEST_ID_HEADER, request_id
from internal.gateway.admission import LIGHT_KEY
from internal.gateway.keyauth import SCOPE_KEY
from internal.gateway.metrics import Metrics

log = structlog.get_logger()

# RFC 9110 §7.6.1 connection-specific headers, plus ones the hop recomputes.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade", "host",
})
# The client's token is not the daemon's business (the gateway presents its service
# token instead); forwarding headers a client wrote itself would let it pose as any
# address, so they are dropped and X-Forwarded-For is set from the connection.
_DROP_FROM_REQUEST = HOP_BY_HOP | {"authorization", "lakehouse-scope", "x-forwarded-for",
                                   "forwarded", "lakehouse-priority",
                                   "x-real-ip", "x-forwarded-host", "x-forwarded-proto"}
_DROP_KEEP_AUTH = _DROP_FROM_REQUEST - {"authorization"}
_CHUNK = 64 * 1024
_SMALL = 64 * 1024  # answers up to this size are relayed whole, larger ones streamed


def _forward_headers(headers: CIMultiDict[str] | CIMultiDictProxy[str],
                     drop: frozenset[str] = HOP_BY_HOP) -> CIMultiDict[str]:
    """The headers without `drop` (lower case; hop-by-hop by default) and without those
    the Connection header names."""
    for value in headers.getall("Connection", ()):
        drop = drop | {v.strip().lower() for v in value.split(",")}
    return CIMultiDict([(k, v) for k, v in headers.items() if k.lower() not in drop])


@functools.lru_cache(maxsize=64)
def _client_timeout(seconds: float, wait: float) -> aiohttp.ClientTimeout:
    """At most `wait` for a free upstream connection (and 5 s to connect), then no more
    than `seconds` between reads."""
    return aiohttp.ClientTimeout(total=None, connect=wait, sock_connect=min(seconds, 5.0),
                                 sock_read=seconds)


class _Body:
    """The request body: a head read whole (within the body timeout) before any upstream
    connection is taken, then, when longer, the rest streamed in chunks with the same
    timeout between chunks and cut off once it passes the limit.

    aiohttp wraps an error raised while sending into a ClientConnectionError, so
    the overflow is remembered here for the caller to turn into a 413.
    """

    def __init__(self, request: web.Request, limit: int, timeout: float) -> None:
        self.request = request
        self.limit = limit
        self.timeout = timeout
        self.head = b""
        self.complete = True
        self.too_large = False
        self.timed_out = False

    async def read_head(self, size: int) -> None:
        """Read up to `size` bytes (at least all of a body that short); 408 when slow."""
        parts: list[bytes] = []
        seen = 0
        content = self.request.content
        try:
            async with asyncio.timeout(self.timeout):
                while seen < size:
                    chunk = await content.readany()
                    if not chunk:
                        break
                    parts.append(chunk)
                    seen += len(chunk)
                    if seen > self.limit:
                        raise PayloadTooLarge(f"request body larger than {self.limit} bytes")
        except TimeoutError:
            raise RequestTimeout(
                f"request body not received within {self.timeout:g}s") from None
        self.head = b"".join(parts)
        self.complete = content.at_eof()

    async def chunks(self) -> AsyncIterator[bytes]:
        seen = len(self.head)
        if self.head:
            yield self.head
        content = self.request.content
        while True:
            try:
                async with asyncio.timeout(self.timeout):
                    chunk = await content.readany()
            except TimeoutError:
                self.timed_out = True
                raise RequestTimeout(f"request body stalled for {self.timeout:g}s") from None
            if not chunk:
                return
            seen += len(chunk)
            if seen > self.limit:
                self.too_large = True
                raise PayloadTooLarge(f"request body larger than {self.limit} bytes")
            yield chunk


@dataclass(frozen=True)
class Limits:
    """How the proxy protects the daemons from slow or many clients (GatewayConfig)."""

    max_body_bytes: int
    body_timeout: float = 30.0  # to receive a buffered body, or between streamed chunks
    buffer_bytes: int = 1024 * 1024  # bodies up to this are read whole before connecting
    upstream_wait: float = 5.0  # for a free upstream connection, then 503
    stream_slots: int = 32  # streamed (larger) bodies in flight per upstream


class Proxy:
    """Sends a request to the first reachable address of an upstream and relays the answer.

    A body up to `buffer_bytes` is read whole, within `body_timeout`, before an upstream
    connection is taken: a client sending one byte a second holds a gateway task, never
    a connection to a daemon. Larger bodies are streamed, at most `stream_slots` per
    upstream at once. Waiting for a free upstream connection is bounded (503).
    """

    def __init__(self, session: aiohttp.ClientSession, metrics: Metrics,
                 max_body_bytes: int | Limits, service_token: str = "",
                 write_session: aiohttp.ClientSession | None = None) -> None:
        self.session = session
        # Writes (upserts, deletes, uploads) on connections of their own: a bulk load
        # holding every connection it may have never leaves a search waiting for one.
        self.write_session = write_session or session
        self.metrics = metrics
        self.limits = max_body_bytes if isinstance(max_body_bytes, Limits) else Limits(max_body_bytes)
        self.max_body_bytes = self.limits.max_body_bytes
        self._streams: dict[str, asyncio.Semaphore] = {}
        self.authorization = f"Bearer {service_token}" if service_token else ""

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body larger than {self.max_body_bytes} bytes")

    @contextlib.asynccontextmanager
    async def _stream_slot(self, upstream: Upstream, streamed: bool) -> AsyncIterator[None]:
        if not streamed:
            yield
            return
        slots = self._streams.setdefault(upstream.name, asyncio.Semaphore(self.limits.stream_slots))
        try:
            async with asyncio.timeout(self.limits.upstream_wait):
                await slots.acquire()
        except TimeoutError:
            raise Unavailable(f"{upstream.name}: too many large uploads in flight",
                              code=f"{upstream.name}_unavailable") from None
        try:
            yield
        finally:
            slots.release()

    async def forward(self, request: web.Request, upstream: Upstream, timeout: float,
                      idempotent: bool = False, keep_auth: bool = False, *,
                      write: bool = False) -> web.StreamResponse:
        """Proxy one request. `idempotent`: a connection lost mid-call may be retried on
        the next address (only when the whole body is in memory). `keep_auth`: pass the
        caller's Authorization on (mcpd calls the gateway back on the caller's behalf).
        `write`: sent on the write connections."""
        limits = self.limits
        declared = request.content_length
        if declared is not None and declared > self.max_body_bytes:
            raise self._too_large()
        # The client's token is not the daemon's business (the gateway presents its service
        # token instead), except for a daemon that calls the gateway back on the client's
        # behalf (mcpd), which gets the client's own.
        headers = _forward_headers(request.headers,
                                   _DROP_KEEP_AUTH if keep_auth else _DROP_FROM_REQUEST)
        headers[REQUEST_ID_HEADER] = request_id(request)
        if request.remote:
            headers["X-Forwarded-For"] = request.remote
        if request.get(LIGHT_KEY):  # the gateway's mark, never the client's own
            headers[PRIORITY_HEADER] = LIGHT
        if self.authorization and not keep_auth:
            headers["Authorization"] = self.authorization
            scope = request.get(SCOPE_KEY)
            if scope is not None:  # the daemon holds the request to the caller's scope
                headers[SCOPE_HEADER] = encode_scope(scope)
        body = _Body(request, self.max_body_bytes, limits.body_timeout)
        if request.body_exists:
            await body.read_head(limits.buffer_bytes)
        streamed = not body.complete
        session = self.write_session if write else self.session
        async with self._stream_slot(upstream, streamed):
            return await self._send(request, upstream, timeout, headers, body,
                                    idempotent and not streamed, session)

    async def _send(self, request: web.Request, upstream: Upstream, timeout: float,
                    headers: CIMultiDict[str], body: _Body, retry_lost: bool,
                    session: aiohttp.ClientSession) -> web.StreamResponse:
        wait = self.limits.upstream_wait
        started = time.perf_counter()

        async def send(address: str) -> aiohttp.ClientResponse:
            nonlocal started
            data: bytes | AsyncIterator[bytes] | None = None
            if not body.complete:
                data = body.chunks()
            elif request.body_exists:
                data = body.head
            started = time.perf_counter()
            try:
                # The path exactly as the client sent it (encoded=True): parsed again, yarl
                # would resolve a `..` segment and send another route than the one checked.
                return await session.request(
                    request.method, URL(f"{address}{request.rel_url.raw_path_qs}", encoded=True),
                    headers=headers,
                    data=data, timeout=_client_timeout(timeout, wait), allow_redirects=False)
            except aiohttp.ConnectionTimeoutError:
                raise  # no free connection within `wait`: nothing sent, failover goes on
            except asyncio.TimeoutError:
                if body.timed_out:
                    raise RequestTimeout(
                        f"request body stalled for {self.limits.body_timeout:g}s") from None
                self.metrics.observe_upstream(upstream.name, "timeout", time.perf_counter() - started)
                raise UpstreamTimeout(f"{upstream.name} did not answer {request.method} "
                                      f"{request.path} within {timeout:g}s") from None
            except aiohttp.ClientError:
                if body.too_large:  # aiohttp wraps the overflow raised while sending
                    raise self._too_large() from None
                if body.timed_out:
                    raise RequestTimeout(
                        f"request body stalled for {self.limits.body_timeout:g}s") from None
                raise

        def observe(outcome: str, address: str, error: BaseException) -> None:
            label = "error" if outcome == "lost" else outcome
            self.metrics.observe_upstream(upstream.name, label, time.perf_counter() - started)
            log.warning(f"upstream_{'failed' if outcome == 'lost' else outcome}",
                        upstream=upstream.name, address=address, error=str(error))

        upstream_resp = await failover(upstream, send, retry_lost=retry_lost, observe=observe)
        self.metrics.observe_upstream(upstream.name, str(upstream_resp.status),
                                      time.perf_counter() - started)
        return await self._relay(request, upstream_resp, upstream.name)

    async def _relay(self, request: web.Request, upstream_resp: aiohttp.ClientResponse,
                     name: str) -> web.StreamResponse:
        """Stream the daemon's answer to the client: status, headers and body unchanged."""
        async with upstream_resp:
            headers = _forward_headers(upstream_resp.headers)
            # Set before prepare(): the middleware's own header comes too late for a stream.
            headers[REQUEST_ID_HEADER] = request_id(request)
            length = upstream_resp.content_length
            if length is not None and length <= _SMALL and request.method != "HEAD":
                try:
                    resp_body = await upstream_resp.read()
                except asyncio.TimeoutError:
                    raise UpstreamTimeout(f"{name} stopped answering {request.method} {request.path}") from None
                except aiohttp.ClientError:
                    raise Unavailable(f"{name} failed while answering: connection lost",
                                      code=f"{name}_unavailable") from None
                return web.Response(status=upstream_resp.status, reason=upstream_resp.reason,
                                    headers=headers, body=resp_body)
            resp = web.StreamResponse(status=upstream_resp.status, reason=upstream_resp.reason,
                                      headers=headers)
            if length is not None:
                resp.content_length = length
            await resp.prepare(request)
            try:
                async for chunk in upstream_resp.content.iter_chunked(_CHUNK):
                    await resp.write(chunk)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                # Headers are gone; the only honest signal left is a cut connection.
                log.warning("upstream_stream_broken", upstream=name, error=str(exc))
                if request.transport is not None:
                    request.transport.close()
                return resp
            await resp.write_eof()
            return resp
