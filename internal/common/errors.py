"""Exceptions inside, HTTP status at the edge: one table maps each to a status."""

from __future__ import annotations


class LakehouseError(Exception):
    """Base of every error a daemon turns into a response."""

    status = 500
    code = "internal"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
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
