"""Exceptions inside, HTTP status at the edge: each class carries its status, and
`from_status` turns a status and code answered by a server back into the same class."""

from __future__ import annotations


class LakehouseError(Exception):
    """Base of every error a daemon turns into a response."""

    status = 500
    code = "internal"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        # The server's id of the failed request (its error body's), for finding it in the logs.
        self.request_id = request_id
        if code is not None:
            self.code = code


class InvalidArgument(LakehouseError):
    status = 400
    code = "invalid_argument"


class Unauthorized(LakehouseError):
    status = 401
    code = "unauthorized"


class NotFound(LakehouseError):
    status = 404
    code = "not_found"


class RequestTimeout(LakehouseError):
    """The client did not send its request body in time."""

    status = 408
    code = "request_timeout"


class Conflict(LakehouseError):
    status = 409
    code = "conflict"


class PayloadTooLarge(LakehouseError):
    status = 413
    code = "payload_too_large"


class UpstreamError(LakehouseError):
    """A daemon or server we called failed; message carries its words."""

    status = 502
    code = "upstream_error"


class Unavailable(LakehouseError):
    status = 503
    code = "unavailable"


class UpstreamTimeout(LakehouseError):
    status = 504
    code = "upstream_timeout"


class ServiceError(LakehouseError):
    """An error answered by another Lakehouse daemon, kept with its own status and code."""

    def __init__(self, status: int, code: str, message: str, *, service: str,
                 field: str | None = None) -> None:
        super().__init__(message, field=field, code=code)
        self.status = status
        self.service = service


# Status -> class, the reverse of each class's `status` (ServiceError keeps any status).
_BY_STATUS: dict[int, type[LakehouseError]] = {
    cls.status: cls for cls in (InvalidArgument, Unauthorized, NotFound, RequestTimeout, Conflict,
                                PayloadTooLarge, UpstreamError, Unavailable, UpstreamTimeout)
}


def from_status(status: int, code: str, message: str, *, field: str | None = None,
                request_id: str | None = None) -> LakehouseError:
    """The exception of the class that answers `status` (LakehouseError for any other),
    keeping the status and code as answered (`model_mismatch` is a Conflict, 409)."""
    exc = _BY_STATUS.get(status, LakehouseError)(message, field=field, code=code,
                                                  request_id=request_id)
    exc.status = status
    return exc


def describe(exc: BaseException) -> str:
    """One line for logs and for the errors reported inside an answer: which service said
    what (`vectord answered 404 not_found: ...`), else the code and message."""
    if isinstance(exc, ServiceError):
        return f"{exc.service} answered {exc.status} {exc.code}: {exc.message}"
    if isinstance(exc, LakehouseError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
