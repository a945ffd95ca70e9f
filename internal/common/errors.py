"""Exceptions inside, HTTP status at the edge, both ways in one place: each class carries
its status; `from_status` (the public client) and `from_service` (a daemon calling
another) turn a status and code answered by a server back into the same class;
`describe` says it in one line; `blames_input` says whether the request's content is
at fault (the one rule for "retry item by item to find the bad one")."""

from __future__ import annotations

from collections.abc import Mapping

from lakehouse.errors import (  # the classes, one per status, are the client's own
    BY_STATUS,
)
from lakehouse.errors import (
    Conflict as Conflict,
)
from lakehouse.errors import (
    InvalidArgument as InvalidArgument,
)
from lakehouse.errors import (
    LakehouseError as LakehouseError,
)
from lakehouse.errors import (
    NotFound as NotFound,
)
from lakehouse.errors import (
    PayloadTooLarge as PayloadTooLarge,
)
from lakehouse.errors import (
    RequestTimeout as RequestTimeout,
)
from lakehouse.errors import (
    TooManyRequests as TooManyRequests,
)
from lakehouse.errors import (
    Unauthorized as Unauthorized,
)
from lakehouse.errors import (
    Unavailable as Unavailable,
)
from lakehouse.errors import (
    UpstreamError as UpstreamError,
)
from lakehouse.errors import (
    UpstreamTimeout as UpstreamTimeout,
)
from lakehouse.errors import (
    from_status as from_status,
)


class ServiceError(LakehouseError):
    """An error answered by another Lakehouse daemon, kept with its own status and code.
    Made by `from_service`, it is also an instance of the status's class (a vectord 404
    is a NotFound)."""

    def __init__(self, status: int, code: str, message: str, *, service: str,
                 field: str | None = None) -> None:
        super().__init__(message, field=field, code=code)
        self.status = status
        self.service = service


_SERVICE_BY_STATUS: dict[int, type[ServiceError]] = {
    status: type(f"Service{cls.__name__}", (ServiceError, cls), {})
    for status, cls in BY_STATUS.items()
}


def from_service(status: int, code: str, message: str, *, service: str,
                 field: str | None = None) -> ServiceError:
    """A daemon's error answer as a ServiceError that is also of its status's class."""
    return _SERVICE_BY_STATUS.get(status, ServiceError)(status, code, message, service=service,
                                                        field=field)


# 4xx that do not blame the request's content: who asks, what is asked for, when.
_NOT_THE_CONTENT = frozenset({401, 403, 404, 408, 409, 429})


def blames_input(exc: BaseException) -> bool:
    """Whether the content sent is at fault (a 4xx other than auth, a missing target, a
    slow body, a conflict or a rate limit): trying its parts one by one finds the bad
    part; anything else is the server's or the moment's trouble."""
    return (isinstance(exc, LakehouseError) and 400 <= exc.status < 500
            and exc.status not in _NOT_THE_CONTENT)


def in_callers_fields(exc: BaseException, fields: Mapping[str, str], *, prefix: str = ""
                      ) -> InvalidArgument | None:
    """Another daemon's 400 told in the caller's own field names: the field after
    `prefix` (`items[0].tags[2]` -> `tags[2]`) has its root looked up in `fields`; a root
    mapped to itself keeps its path (`tags[2]`), another gives the caller's flat field.
    None when exc is not a 400 naming a field of `fields` (then it is not the caller's)."""
    if not isinstance(exc, LakehouseError) or exc.status != 400 or not exc.field:
        return None
    if not exc.field.startswith(prefix):
        return None
    rest = exc.field[len(prefix):]
    root = rest.split("[")[0].split(".")[0]
    mapped = fields.get(root)
    if mapped is None:
        return None
    ours = mapped + rest[len(root):] if mapped == root else mapped
    detail = (exc.message.split(": ", 1)[1] if exc.message.startswith(exc.field + ":")
              else exc.message)
    return InvalidArgument(f"{ours}: {detail}", field=ours)


def describe(exc: BaseException) -> str:
    """One line for logs and for the errors reported inside an answer: which service said
    what (`vectord answered 404 not_found: ...`), else the code and message."""
    if isinstance(exc, ServiceError):
        return f"{exc.service} answered {exc.status} {exc.code}: {exc.message}"
    if isinstance(exc, LakehouseError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
