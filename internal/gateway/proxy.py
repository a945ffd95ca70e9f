"""Reverse proxy to one upstream daemon: bodies streamed both ways, never buffered whole."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator

import aiohttp
import structlog
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from internal.common.errors import PayloadTooLarge, Unavailable, UpstreamTimeout
from internal.common.web import REQUEST_ID_HEADER, request_id
from internal.gateway.metrics import Metrics
from internal.gateway.upstreams import Upstream

log = structlog.get_logger()

# RFC 9110 §7.6.1 connection-specific headers, plus ones the hop recomputes.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade", "host",
})
# The client's token is not the daemon's business (the gateway presents its service
# token instead); forwarding headers a client wrote itself would let it pose as any
# address, so they are dropped and X-Forwarded-For is set from the connection.
_DROP_FROM_REQUEST = HOP_BY_HOP | {"authorization", "x-forwarded-for", "forwarded",
                                   "x-real-ip", "x-forwarded-host", "x-forwarded-proto"}
_CHUNK = 64 * 1024
_SMALL = 64 * 1024  # bodies up to this size are relayed whole, larger ones streamed


def _forward_headers(headers: CIMultiDict[str] | CIMultiDictProxy[str],
                     drop: frozenset[str] = HOP_BY_HOP) -> CIMultiDict[str]:
    """The headers without `drop` (lower case; hop-by-hop by default) and without those
    the Connection header names."""
    for value in headers.getall("Connection", ()):
        drop = drop | {v.strip().lower() for v in value.split(",")}
    return CIMultiDict([(k, v) for k, v in headers.items() if k.lower() not in drop])


@functools.lru_cache(maxsize=64)
def _client_timeout(seconds: float) -> aiohttp.ClientTimeout:
    """Connect within 5 s (or less), then no more than `seconds` between reads."""
    return aiohttp.ClientTimeout(total=None, sock_connect=min(seconds, 5.0), sock_read=seconds)


class _Body:
    """The request body in chunks, cut off once it passes the limit.

    aiohttp wraps an error raised while sending into a ClientConnectionError, so
    the overflow is remembered here for the caller to turn into a 413.
    """

    def __init__(self, request: web.Request, limit: int) -> None:
        self.request = request
        self.limit = limit
        self.too_large = False

    async def chunks(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.request.content.iter_chunked(_CHUNK):
            seen += len(chunk)
            if seen > self.limit:
                self.too_large = True
                raise PayloadTooLarge(f"request body larger than {self.limit} bytes")
            yield chunk


class Proxy:
    """Sends a request to the first reachable address of an upstream and relays the answer."""

    def __init__(self, session: aiohttp.ClientSession, metrics: Metrics, max_body_bytes: int,
                 service_token: str = "") -> None:
        self.session = session
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.authorization = f"Bearer {service_token}" if service_token else ""

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body larger than {self.max_body_bytes} bytes")

    async def forward(self, request: web.Request, upstream: Upstream, timeout: float
                      ) -> web.StreamResponse:
        declared = request.content_length
        if declared is not None and declared > self.max_body_bytes:
            raise self._too_large()
        headers = _forward_headers(request.headers, _DROP_FROM_REQUEST)
        headers[REQUEST_ID_HEADER] = request_id(request)
        if request.remote:
            headers["X-Forwarded-For"] = request.remote
        if self.authorization:
            headers["Authorization"] = self.authorization
        # A small body with a declared length is read in one go (cheaper than a stream
        # of one chunk); anything else, or anything larger, is streamed.
        small_body: bytes | None = None
        if declared is not None and declared <= _SMALL:
            small_body = await request.read()
        last_error = ""
        for address in upstream.order():
            url = f"{address}{request.rel_url.raw_path_qs}"
            body = _Body(request, self.max_body_bytes)
            data: bytes | AsyncIterator[bytes] | None = None
            if small_body is not None:
                data = small_body
            elif request.body_exists:
                data = body.chunks()
            started = time.perf_counter()
            try:
                upstream_resp = await self.session.request(
                    request.method, url, headers=headers, data=data,
                    timeout=_client_timeout(timeout), allow_redirects=False)
            except aiohttp.ClientConnectorError as exc:
                # Nothing was sent: safe to try the next address.
                upstream.mark_failed(address)
                self.metrics.observe_upstream(upstream.name, "unreachable", time.perf_counter() - started)
                log.warning("upstream_unreachable", upstream=upstream.name, address=address, error=str(exc))
                last_error = f"{upstream.name} unreachable at {address}"
                continue
            except asyncio.TimeoutError:
                self.metrics.observe_upstream(upstream.name, "timeout", time.perf_counter() - started)
                raise UpstreamTimeout(
                    f"{upstream.name} did not answer {request.method} {request.path} within {timeout:g}s"
                ) from None
            except aiohttp.ClientError as exc:
                if body.too_large:
                    raise self._too_large() from None
                upstream.mark_failed(address)
                self.metrics.observe_upstream(upstream.name, "error", time.perf_counter() - started)
                log.warning("upstream_failed", upstream=upstream.name, address=address, error=str(exc))
                raise Unavailable(f"{upstream.name} failed at {address}: connection lost",
                                  code=f"{upstream.name}_unavailable") from None
            upstream.mark_ok(address)
            self.metrics.observe_upstream(upstream.name, str(upstream_resp.status),
                                          time.perf_counter() - started)
            return await self._relay(request, upstream_resp, upstream.name)
        raise Unavailable(last_error or f"{upstream.name} unavailable",
                          code=f"{upstream.name}_unavailable")

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
