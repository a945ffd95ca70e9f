"""HTTP plumbing every daemon shares: the error body, request ids, JSON in and out."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, NoReturn, TypeVar

import msgspec
import structlog
from aiohttp import web, web_protocol, web_server
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_request import BaseRequest

from internal.common import jsonlimits, stackdump
from internal.common.errors import (
    InvalidArgument,
    LakehouseError,
    PayloadTooLarge,
    RequestTimeout,
    TooManyRequests,
)
from internal.common.lsn import LSN_HEADER, REQUEST_LSN, WRITTEN, format_lsn, parse_lsn
from internal.common.priority import PRIORITY, PRIORITY_HEADER, of_header
from lakehouse.wire.responses import ErrorBody, ErrorDetail, Health

log = structlog.get_logger()
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

REQUEST_ID_HEADER = "X-Request-ID"
REQUEST_ID_KEY = web.RequestKey("request_id", str)  # request[...] slot holding the id
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_encoder = msgspec.json.Encoder()
# Request ids made here: 64 random bits per process, then a counter (32 hex digits, as a
# uuid4's; a uuid4 a request was 2% of vectord's CPU per BM25 search at 5,000 documents).
_RID_PREFIX = uuid.uuid4().hex[:16]
_rid_numbers = itertools.count(1)


def _new_rid_prefix() -> None:
    global _RID_PREFIX, _rid_numbers
    _RID_PREFIX, _rid_numbers = uuid.uuid4().hex[:16], itertools.count(1)


os.register_at_fork(after_in_child=_new_rid_prefix)  # a forked child numbers afresh


def new_request_id() -> str:
    """An id unique to this request: a random prefix per process and a counter."""
    return f"{_RID_PREFIX}{next(_rid_numbers):016x}"


_PARAM = re.compile(r"\{(\w+)\}")


def route(template: str) -> str:
    """An aiohttp route template whose plain `{param}` segments take any characters but `/`.

    aiohttp's default segment pattern, `[^{}/]+`, refuses `{` and `}`, so an item id such
    as `{.md#0` (a page named `{.md`) would find no route; `/` itself comes encoded (%2F)
    and stays one segment: routing matches `rel_url.path_safe`, where %2F is kept.
    """
    return _PARAM.sub(r"{\1:[^/]+}", template)


def error_body(code: str, message: str, request_id: str, field: str | None = None) -> ErrorBody:
    """The one error shape of every daemon (pinned by tests/test_error_shape.py)."""
    return ErrorBody(error=ErrorDetail(code=code, message=message, field=field),
                     request_id=request_id)


def error_response(status: int, code: str, message: str, request_id: str,
                   field: str | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=_encoder.encode(error_body(code, message, request_id, field)),
        content_type="application/json",
        headers={REQUEST_ID_HEADER: request_id},
    )


def json_response(obj: Any, status: int = 200) -> web.Response:
    """Encode with msgspec (structs, dataclasses, dicts) into a JSON response."""
    return web.Response(status=status, body=_encoder.encode(obj), content_type="application/json")


def request_id(request: web.Request) -> str:
    rid = request.get(REQUEST_ID_KEY)
    return rid if isinstance(rid, str) else ""


_HTTP_CODES = {
    400: "invalid_argument", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 408: "request_timeout", 409: "conflict", 413: "payload_too_large",
    414: "uri_too_long", 415: "unsupported_media_type", 429: "too_many_requests",
    431: "headers_too_large",
}


def _check_url_params(request: web.Request) -> None:
    """A NUL (%00) in a path segment or query parameter is a 400 naming it.

    PostgreSQL text cannot hold NUL; ids in paths and `?prefix=`/`?after=` reach SQL.
    Only URLs holding "%00" at all are looked at (a raw NUL never gets past the parser).
    """
    if "%00" not in request.raw_path:
        return
    for key, value in request.match_info.items():
        if "\x00" in value:
            raise InvalidArgument(f"{key}: must not contain NUL characters", field=key)
    for key, value in request.query.items():
        if "\x00" in value or "\x00" in key:
            raise InvalidArgument(f"{key}: must not contain NUL characters", field=key)
    if "\x00" in request.path:
        raise InvalidArgument("path: must not contain NUL characters", field="path")


async def _render_errors(request: web.Request, handler: Handler, rid: str) -> web.StreamResponse:
    """The handler's response, or its exception as the common error body."""
    try:
        _check_url_params(request)
        return await handler(request)
    except LakehouseError as exc:
        if exc.status >= 500 and exc.code == "internal":
            log.error("request_failed", error=exc.message, path=request.path)
            return error_response(500, "internal", "internal error", rid)
        resp = error_response(exc.status, exc.code, exc.message, rid, exc.field)
        if isinstance(exc, TooManyRequests) and exc.retry_after is not None:
            resp.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        return resp
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "http_error")
        message = exc.reason
        if exc.status == 413:
            message = f"request body larger than {request.client_max_size} bytes"
        elif exc.status == 404:
            message = f"no route for {request.method} {request.path}"
        elif exc.status == 405:
            message = f"{request.method} is not allowed on {request.path}"
        resp = error_response(exc.status, code, message, rid)
        allow = exc.headers.get("Allow")
        if allow is not None:  # RFC 9110 §15.5.6: a 405 says which methods are
            resp.headers["Allow"] = allow
        return resp
    except Exception:
        log.exception("request_crashed", path=request.path)
        return error_response(500, "internal", "internal error", rid)


KEY_ID_KEY = "lakehouse_key_id"


@web.middleware
async def context_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bind a request id, map exceptions to the error body, log one access line."""
    incoming = request.headers.get(REQUEST_ID_HEADER, "")
    rid = incoming if _REQUEST_ID_RE.match(incoming) else new_request_id()
    request[REQUEST_ID_KEY] = rid
    started = time.perf_counter()
    # bind/reset rather than the bound_contextvars context manager: same effect, less CPU.
    tokens = structlog.contextvars.bind_contextvars(request_id=rid)
    lsn_token = REQUEST_LSN.set(request.headers.get(LSN_HEADER) or None)
    priority_token = PRIORITY.set(of_header(request.headers.get(PRIORITY_HEADER)))
    written: list[int] = []
    written_token = WRITTEN.set(written)
    try:
        resp = await _render_errors(request, partial(_lsn_checked, handler), rid)
        resp.headers[REQUEST_ID_HEADER] = rid
        if written and LSN_HEADER not in resp.headers and not resp.prepared:
            resp.headers[LSN_HEADER] = format_lsn(max(written))
        log.info(
            "request",
            method=request.method,
            path=request.path,
            status=resp.status,
            ms=round((time.perf_counter() - started) * 1000, 2),
            key_id=request.get(KEY_ID_KEY),  # set by the auth middleware; never a secret
        )
        return resp
    finally:
        WRITTEN.reset(written_token)
        REQUEST_LSN.reset(lsn_token)
        PRIORITY.reset(priority_token)
        structlog.contextvars.reset_contextvars(**tokens)


async def _lsn_checked(handler: Handler, request: web.Request) -> web.StreamResponse:
    """The handler, after a 400 naming Lakehouse-LSN if the header is not a WAL position."""
    raw = REQUEST_LSN.get()
    if raw is not None:
        parse_lsn(raw)
    return await handler(request)


def _field_from_msgspec(message: str) -> str | None:
    """'Expected `int`, got `str` - at `$.items[0].id`' -> 'items[0].id'."""
    m = re.search(r"at `\$\.?([^`]*)`", message)
    if m is None:
        return None
    return m.group(1) or None


def _first_non_finite(obj: Any, path: str = "") -> str | None:
    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "$"
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = _first_non_finite(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            found = _first_non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def decode(raw: bytes, type_: type[T]) -> T:
    """Decode and validate JSON; errors become 400s that name the field.

    Beyond msgspec's own checks: invalid UTF-8, NUL characters in any string and
    free-form values nested deeper than jsonlimits.MAX_DEPTH are refused too.
    """
    if not raw.strip():
        raise InvalidArgument("request body is empty; expected a JSON object", code="invalid_json")
    try:
        obj = msgspec.json.decode(raw, type=type_)
    except UnicodeDecodeError:
        field = jsonlimits.bad_utf8_field(raw)
        raise InvalidArgument(f"{field or 'body'}: not valid UTF-8", field=field,
                              code="invalid_json") from None
    except RecursionError:
        path = jsonlimits.deep_path(raw, jsonlimits.MAX_DEPTH)
        field = jsonlimits.field_of_path(path, type_) if path else None
        raise InvalidArgument(
            f"{field or 'body'}: nested deeper than {jsonlimits.MAX_DEPTH} levels",
            field=field) from None
    except msgspec.ValidationError as exc:
        _raise_validation(exc, raw, type_)
    except msgspec.DecodeError as exc:
        _raise_decode(raw, exc)
    if b"\\u0000" in raw:
        field = jsonlimits.nul_field(raw)
        if field is not None:
            raise InvalidArgument(f"{field}: must not contain NUL characters", field=field)
    deep = jsonlimits.check_depth(obj, type_)
    if deep is not None:
        raise InvalidArgument(f"{deep}: nested deeper than {jsonlimits.MAX_DEPTH} levels",
                              field=deep)
    return obj


def validation_field(message: str) -> str | None:
    """The field a msgspec validation error names: its path, and for a missing or an
    unknown field that field under it ('items[0].id', 'kk')."""
    field = _field_from_msgspec(message)
    if field is None and "missing required field" in message:
        m = re.search(r"field `([^`]+)`", message)
        field = m.group(1) if m else None
    elif field is not None and "missing required field" in message:
        m = re.search(r"field `([^`]+)`", message)
        field = f"{field}.{m.group(1)}" if m else field
    elif field is not None and "unknown field" in message:
        m = re.search(r"field `([^`]+)`", message)
        field = f"{field}.{m.group(1)}" if m else field
    elif field is None and "unknown field" in message:
        m = re.search(r"field `([^`]+)`", message)
        field = m.group(1) if m else None
    return field


def _raise_validation(exc: msgspec.ValidationError, raw: bytes, type_: Any) -> NoReturn:
    """A msgspec validation error as a 400 naming the field."""
    msg = str(exc)
    field = validation_field(msg)
    if field is not None and "[...]" in field:
        # msgspec does not say which key of a dict held the bad value: find it (else
        # name the dict).
        keyed = jsonlimits.dict_key_at(raw, type_, field)
        msg = msg.replace(f"`$.{field}`", f"`$.{keyed}`") if keyed else msg.replace("[...]", "")
        field = keyed or field.split("[...]")[0] or None
    text = msg.replace("Number out of range", "number out of range (must be finite)")
    raise InvalidArgument(f"{field or 'body'}: {text}", field=field) from None


def _raise_decode(raw: bytes, exc: msgspec.DecodeError) -> NoReturn:
    """Malformed JSON as a 400; NaN/Infinity (not JSON) name their field."""
    # NaN and Infinity are not JSON; find where they are to name the field.
    try:
        loose = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidArgument(f"malformed JSON: {exc}", code="invalid_json") from None
    where = _first_non_finite(loose)
    if where is not None:
        raise InvalidArgument(f"{where}: must be a finite number", field=where) from None
    raise InvalidArgument(f"malformed JSON: {exc}", code="invalid_json") from None


# A client must send its whole request body within this (408 after), so a slow client
# holds one task for a bounded time and never a database connection.
BODY_TIMEOUT_SECONDS = 30.0


async def read_json(request: web.Request, type_: type[T]) -> T:
    """Read the whole body (bounded by client_max_size and BODY_TIMEOUT_SECONDS) and
    decode it as type_."""
    try:
        if request.content.is_eof():  # the whole body is here: nothing to wait for
            raw = await request.read()
        else:
            async with asyncio.timeout(BODY_TIMEOUT_SECONDS):
                raw = await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"request body not received within {BODY_TIMEOUT_SECONDS:g}s") from None
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(
            f"request body larger than {request.client_max_size} bytes"
        ) from None
    return decode(raw, type_)


_HEALTHY = Health(status="ok")


async def healthz(_: web.Request) -> web.Response:
    return json_response(_HEALTHY)


# The Server header names no software or version (aiohttp's default says both).
SERVER_NAME = "lakehouse"


async def _server_header(_: web.Request, resp: web.StreamResponse) -> None:
    resp.headers["Server"] = SERVER_NAME


def make_base_app(max_body_bytes: int = 64 * 1024 * 1024) -> web.Application:
    """An Application with the shared middleware and /healthz."""
    app = web.Application(client_max_size=max_body_bytes, middlewares=[context_middleware])
    app.on_response_prepare.append(_server_header)
    app.router.add_get("/healthz", healthz)
    return app


class JsonErrorRequestHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler, but what fails before routing (a request line over
    8 KB, a malformed header) is answered in the one error body, not aiohttp's plain text."""

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None, message: str | None = None
                     ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs; refuses if bytes went out
        field: str | None = None
        if status >= 500:
            code, text = "internal", "internal error"
        elif isinstance(exc, LineTooLong):
            line = exc.args[0] if exc.args else b""
            if isinstance(line, (bytes, bytearray)) and line[:1] == b"/":
                status, code, field = 414, "uri_too_long", "url"
                text = f"URL longer than {exc.args[1]} bytes"
            else:
                status, code = 431, "headers_too_large"
                text = f"a header line is longer than {exc.args[1]} bytes"
        else:
            code = _HTTP_CODES.get(status, "bad_request")
            text = f"malformed HTTP request: {message or exc or 'bad request'}"[:300]
        resp = error_response(status, code, text, new_request_id(), field)
        resp.headers["Server"] = SERVER_NAME
        resp.force_close()
        return resp


def _fast_loop() -> None:
    """uvloop when installed: it roughly halves the event loop's CPU per request."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


# How long in-flight requests may run on after SIGTERM before their sockets are cut.
# aiohttp's default (60 s) outlasts the supervisor's 15 s grace, so a daemon under load
# was SIGKILLed instead of stopping.
SHUTDOWN_SECONDS = 3.0


def run(app: web.Application, host: str, port: int) -> None:
    """Serve until SIGINT/SIGTERM; aiohttp runs the cleanup contexts on the way out."""
    _fast_loop()
    # aiohttp builds one RequestHandler per connection by this module-level name and has
    # no option for another class; ours differs only in how parse errors are answered.
    web_server.RequestHandler = JsonErrorRequestHandler  # type: ignore[attr-defined]
    app.on_startup.append(stackdump.install)
    web.run_app(app, host=host, port=port, access_log=None, print=None, handle_signals=True,
                shutdown_timeout=SHUTDOWN_SECONDS)
