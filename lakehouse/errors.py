"""The exceptions the client raises: the stack's own classes, one per error class.

Every error carries `status` (the HTTP status), `code` (`not_found`, `model_mismatch`,
`vectord_unavailable`, ...), `message`, `field` (the request field at fault, or None)
and `request_id` (the server's id of the request, in every daemon's log line for it).
A status the stack has no class for raises `LakehouseError` itself, with that status.

Raised by the client without an answer from the server (request_id None):
`Unavailable` (code `gateway_unavailable`: nothing answers at the URL; `connection_lost`:
the connection broke mid-call), `UpstreamTimeout` (code `timeout`: no answer within the
client's timeout) and `UpstreamError` (code `invalid_response`: an answer of the wrong shape).
"""

from __future__ import annotations

from internal.common.errors import (
    Conflict,
    InvalidArgument,
    LakehouseError,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    Unauthorized,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
    from_status,
)

__all__ = [
    "Conflict",
    "InvalidArgument",
    "LakehouseError",
    "NotFound",
    "PayloadTooLarge",
    "RequestTimeout",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
    "from_status",
]
