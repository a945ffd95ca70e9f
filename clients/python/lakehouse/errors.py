"""The exceptions the client raises, one class per error status; the server raises the same
classes (internal.common.errors adds its own on top of these).

Every error carries `status` (the HTTP status), `code` (`not_found`, `model_mismatch`,
`vectord_unavailable`, ...), `message`, `field` (the request field at fault, or None)
and `request_id` (the server's id of the request, in every daemon's log line for it).
A status the stack has no class for raises `LakehouseError` itself, with that status.

Raised by the client without an answer from the server (request_id None):
`Unavailable` (code `gateway_unavailable`: nothing answers at the URL; `connection_lost`:
the connection broke mid-call), `UpstreamTimeout` (code `timeout`: no answer within the
client's timeout) and `UpstreamError` (code `invalid_response`: an answer of the wrong shape).
`answered(exc)` tells the server's answers from the first three.
"""

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


class TooManyRequests(LakehouseError):
    """Past the caller's share: try again after `retry_after` seconds (its Retry-After)."""

    status = 429
    code = "too_many_requests"
    retry_after: float | None = None


# Status -> class, the reverse of each class's `status` (ServiceError keeps any status).
BY_STATUS: dict[int, type[LakehouseError]] = {
    cls.status: cls for cls in (InvalidArgument, Unauthorized, NotFound, RequestTimeout, Conflict,
                                PayloadTooLarge, TooManyRequests, UpstreamError, Unavailable,
                                UpstreamTimeout)
}


def from_status(status: int, code: str, message: str, *, field: str | None = None,
                request_id: str | None = None) -> LakehouseError:
    """The exception of the class that answers `status` (LakehouseError for any other),
    keeping the status and code as answered (`model_mismatch` is a Conflict, 409)."""
    exc = BY_STATUS.get(status, LakehouseError)(message, field=field, code=code,
                                                  request_id=request_id)
    exc.status = status
    return exc


# The codes of the errors the client raises itself (no server uses them).
UNREACHABLE = "gateway_unavailable"
CONNECTION_LOST = "connection_lost"
TIMEOUT = "timeout"
INVALID_RESPONSE = "invalid_response"
NO_ANSWER = frozenset({UNREACHABLE, CONNECTION_LOST, TIMEOUT})


def answered(exc: LakehouseError) -> bool:
    """Whether `exc` is the server's answer (an error status), not the client finding no
    server, losing the connection or timing out (the request may not have been served)."""
    return exc.code not in NO_ANSWER


__all__ = [
    "BY_STATUS",
    "CONNECTION_LOST",
    "INVALID_RESPONSE",
    "NO_ANSWER",
    "TIMEOUT",
    "UNREACHABLE",
    "Conflict",
    "InvalidArgument",
    "LakehouseError",
    "NotFound",
    "PayloadTooLarge",
    "RequestTimeout",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
    "answered",
    "from_status",
]
