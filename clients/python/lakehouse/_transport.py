"""HTTP to the gateway: one aiohttp session, retries on 503 and refused connections, waits
out 429 (`Retry-After`) on calls safe to repeat, answers decoded into typed structs (or as
plain JSON), error bodies raised as their exception class."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeVar

import aiohttp
import msgspec

from lakehouse.errors import (
    CONNECTION_LOST,
    INVALID_RESPONSE,
    TIMEOUT,
    UNREACHABLE,
    LakehouseError,
    TooManyRequests,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
    from_status,
)
from lakehouse.lsn import LSN_HEADER, REQUEST_LSN, note_written, parse_lsn
from lakehouse.wire.responses import ErrorAnswer

T = TypeVar("T")


class Paged(Protocol):
    """A page of a listing in id order: `next_after` is the next page's `after`."""

    @property
    def next_after(self) -> str | None: ...


P = TypeVar("P", bound=Paged)

MAX_BACKOFF = 8.0  # seconds: the longest wait between two attempts
# 503 codes that say a feature is off, not that a daemon is busy or starting: not retried.
PERMANENT_503 = frozenset({"sync_not_configured", "config_error"})
# Methods that change nothing when sent twice; a POST is so when its caller says (a search,
# an upsert: the same ids replaced by the same items).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_encoder = msgspec.json.Encoder()


_error_decoder = msgspec.json.Decoder(ErrorAnswer)


def plain(value: Any) -> Any:
    """A request value as JSON-ready builtins; a struct's None fields are left out, so an
    option not set is absent (the server's default), never null."""
    if isinstance(value, msgspec.Struct):
        fields = ((name, getattr(value, name)) for name in value.__struct_fields__)
        return {name: plain(v) for name, v in fields if v is not None}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def body_of(**fields: Any) -> dict[str, Any]:
    """A request body from keyword arguments, without the ones that are None."""
    return {name: plain(value) for name, value in fields.items() if value is not None}


def given_only(**fields: Any) -> dict[str, Any]:
    """The keyword arguments given (not None): a struct built with them keeps its own
    defaults for the others."""
    return {name: value for name, value in fields.items() if value is not None}


def as_given(value: Any) -> Any:
    """An option of a request struct as the caller gave it, its struct or a dict of its
    fields: sent as it is (the server decodes either, and names a bad field)."""
    return value


class Transport:
    """Calls the gateway at `url` with a bearer `token` ("" for none) and `headers`.

    The session is made on the first call, in the running event loop, and reused until
    `aclose()`; or it is `session`, which its owner closes. A 503 answer (a daemon
    starting, busy or restarting; not PERMANENT_503) or a refused connection (nothing was
    sent) is tried again up to `retries` times, waiting `backoff` seconds and doubling (at
    most MAX_BACKOFF); a timeout or a connection lost mid-call is raised at once, since
    the server may still be working on it.

    A 429 (past this caller's share of the stack) on a call safe to repeat is tried again
    after its `Retry-After` (else the backoff), for as long as the waits of one call add up
    to at most `max_wait` seconds; a wait that would go past it raises TooManyRequests at
    once, with `retry_after` set. A 429 does not count against `retries`.
    """

    def __init__(self, url: str, token: str, *, timeout: float, retries: int,
                 backoff: float, max_wait: float = 60.0,
                 session: aiohttp.ClientSession | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        if timeout <= 0 or retries < 0 or backoff < 0 or max_wait < 0:
            raise ValueError("timeout must be > 0, retries, backoff and max_wait >= 0")
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait
        self._headers = {**({"Authorization": f"Bearer {token}"} if token else {}),
                         **(headers or {})}
        self._session = session
        self._owns_session = session is None
        self._closed = False
        # The highest WAL position a write of this client was answered with; sent with
        # every later request, so its searches see its writes even on a read replica.
        self.lsn: str | None = None
        self._lsn_value = -1

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("this Lakehouse client is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def aclose(self) -> None:
        """Close the session it made (idempotent); the client cannot be used afterwards."""
        self._closed = True
        if self._session is not None and self._owns_session:
            await self._session.close()
        self._session = None

    async def call(self, method: str, path: str, response: type[T], *, body: Any = None,
                   params: Mapping[str, str | int] | None = None,
                   answered: frozenset[int] = frozenset(), idempotent: bool = False) -> T:
        """The answer to one request, decoded as `response`; errors raise their class,
        but for the statuses in `answered`, whose body is decoded as `response` too.
        `idempotent`: a POST safe to send again (a 429 is then waited out and retried)."""
        data = _encoder.encode(body) if body is not None else None
        retry = _Retry(self, idempotent or method in IDEMPOTENT_METHODS)
        while True:
            try:
                status, raw, request_id, retry_after = await self._send(method, path, data,
                                                                        params)
            except aiohttp.ClientSSLError:
                raise
            except aiohttp.ClientConnectorError as exc:  # refused or unresolvable: not sent
                await retry.after(Unavailable(f"Lakehouse unreachable at {self.url}: {exc}",
                                              code=UNREACHABLE))
                continue
            if status < 400 or status in answered:
                return _decode(raw, response, method, path)
            await retry.after(_error(status, raw, request_id), retry_after)

    async def pages(self, path: str, response: type[P], *, prefix: str | None,
                    page_size: int) -> AsyncGenerator[P, None]:
        """Each page of a listing in id order (GET with `limit`, `prefix`, `after`), until
        one says there is no next."""
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page_size}
            if prefix:
                params["prefix"] = prefix
            if after is not None:
                params["after"] = after
            page = await self.call("GET", path, response, params=params)
            yield page
            after = page.next_after
            if after is None:
                return

    async def lines(self, method: str, path: str, *, body: Any = None,
                    idempotent: bool = False) -> AsyncGenerator[str, None]:
        """The lines of a streamed answer as they come (server-sent events); an error
        answer raises its class before the first line, retried as `call` retries."""
        data = _encoder.encode(body) if body is not None else None
        retry = _Retry(self, idempotent or method in IDEMPOTENT_METHODS)
        headers = self._request_headers(data)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout,
                                        sock_read=self.timeout)
        while True:
            try:
                resp = await self._get_session().request(method, f"{self.url}{path}",
                                                         data=data, headers=headers,
                                                         timeout=timeout)
            except aiohttp.ClientConnectorError as exc:
                await retry.after(Unavailable(f"Lakehouse unreachable at {self.url}: {exc}",
                                              code=UNREACHABLE))
                continue
            except asyncio.TimeoutError:
                raise UpstreamTimeout(f"{method} {path}: no answer from {self.url} within "
                                      f"{self.timeout} s", code=TIMEOUT) from None
            if resp.status < 400:
                break
            raw = await resp.read()
            resp.release()
            await retry.after(_error(resp.status, raw, resp.headers.get("X-Request-ID")),
                              retry_after_seconds(resp.headers.get("Retry-After")))
        try:
            async for line in resp.content:
                yield line.decode("utf-8", "replace").rstrip("\r\n")
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"{method} {path}: the answer stopped for {self.timeout} s",
                                  code=TIMEOUT) from None
        except aiohttp.ClientError as exc:
            raise Unavailable(f"{method} {path}: the connection to {self.url} broke: {exc}",
                              code=CONNECTION_LOST) from None
        finally:
            resp.release()

    def _request_headers(self, data: bytes | None) -> dict[str, str]:
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        lsn = self._lsn_to_send()
        if lsn is not None:
            headers[LSN_HEADER] = lsn
        return headers

    async def _send(self, method: str, path: str, data: bytes | None,
                    params: Mapping[str, str | int] | None
                    ) -> tuple[int, bytes, str | None, float | None]:
        headers = self._request_headers(data)
        try:
            async with self._get_session().request(
                method, f"{self.url}{path}", data=data, params=params, headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as resp:
                self._note_lsn(resp.headers.get(LSN_HEADER))
                note_written(resp.headers.get(LSN_HEADER))  # a daemon's request, if any
                return (resp.status, await resp.read(), resp.headers.get("X-Request-ID"),
                        retry_after_seconds(resp.headers.get("Retry-After")))
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"{method} {path}: no answer from {self.url} within "
                                  f"{self.timeout} s", code=TIMEOUT) from None
        except aiohttp.ClientConnectorError:
            raise
        except aiohttp.ClientConnectionError as exc:
            raise Unavailable(f"{method} {path}: the connection to {self.url} broke: {exc}",
                              code=CONNECTION_LOST) from None


    def _lsn_to_send(self) -> str | None:
        """This client's last write position, or the position the request being served
        must see when a Lakehouse daemon or command uses the client (the higher)."""
        outer = REQUEST_LSN.get()
        if outer is None:
            return self.lsn
        try:
            return outer if parse_lsn(outer) > self._lsn_value else self.lsn
        except LakehouseError:
            return self.lsn

    def _note_lsn(self, text: str | None) -> None:
        if not text:
            return
        try:
            value = parse_lsn(text)
        except LakehouseError:
            return  # not a position: nothing to keep
        if value > self._lsn_value:
            self._lsn_value, self.lsn = value, text


class _Retry:
    """One call's retry policy: a 503 (not PERMANENT_503) or a refused connection tried
    again up to `retries` times with a doubling backoff; a 429 on a call safe to repeat
    waited out (`Retry-After`, else the backoff) while the waits add up to `max_wait`."""

    def __init__(self, transport: Transport, repeatable: bool) -> None:
        self.t = transport
        self.repeatable = repeatable
        self.attempt = 0
        self.limited = 0
        self.waited = 0.0

    async def after(self, failure: LakehouseError, retry_after: float | None = None) -> None:
        """Wait before the next attempt, or raise `failure` when there is none."""
        t = self.t
        if isinstance(failure, TooManyRequests):
            failure.retry_after = retry_after
            pause = (retry_after if retry_after is not None
                     else min(t.backoff * 2 ** self.limited, MAX_BACKOFF))
            if not self.repeatable or self.waited + pause > t.max_wait:
                raise failure
            self.limited, self.waited = self.limited + 1, self.waited + pause
            await asyncio.sleep(pause)
            return
        if failure.status != 503 or failure.code in PERMANENT_503 or self.attempt == t.retries:
            raise failure  # a refused connection is an Unavailable (503): retried
        await asyncio.sleep(min(t.backoff * 2 ** self.attempt, MAX_BACKOFF))
        self.attempt += 1


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header in seconds (delay-seconds or an HTTP date; never negative),
    or None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _decode(raw: bytes, response: type[T], method: str, path: str) -> T:
    try:
        return msgspec.json.decode(raw, type=response)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UpstreamError(f"{method} {path}: unexpected answer: {exc}",
                            code=INVALID_RESPONSE) from None


def _error(status: int, raw: bytes, request_id: str | None) -> LakehouseError:
    """The exception for an error answer: its body's code, message and field when it has
    the one error shape (a proxy's page in front of the gateway may not)."""
    try:
        body = _error_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        text = raw[:300].decode("utf-8", "replace").strip()
        return from_status(status, "http_error", f"HTTP {status}: {text}", request_id=request_id)
    return from_status(status, body.error.code, body.error.message, field=body.error.field,
                       request_id=body.request_id or request_id)
