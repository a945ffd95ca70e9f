"""The exceptions the client raises: the stack's own classes, one per error class.

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
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
    "answered",
    "from_status",
]
