"""A search's priority along the search path (the `Lakehouse-Priority` header).

The gateway marks a search `light` when its client had nothing else in flight or
waiting in the search lane (and `[gateway] light_priority` is on): a client asking now
and then, beside one that keeps many searches going. Each daemon's request middleware
keeps the mark for the request (`PRIORITY`), its clients pass it on to the daemons they
call, and embedd's interactive lane embeds a light request's question before the other
questions waiting. A client cannot set it: the gateway drops a client's own header, and
a daemon's port takes only the stack's tokens when auth is on.

`bulk` is the other way: work the service does for itself behind the searches (the
learned ranker's training searches), which vectord runs on database backends at the
writes' lower OS priority.
"""

from __future__ import annotations

from contextvars import ContextVar

PRIORITY_HEADER = "Lakehouse-Priority"
LIGHT = "light"
BULK = "bulk"
PRIORITY: ContextVar[str | None] = ContextVar("lakehouse_priority", default=None)


def of_header(value: str | None) -> str | None:
    """The priority a request header names (LIGHT or BULK), else None."""
    named = value.strip().lower() if value is not None else None
    return named if named in (LIGHT, BULK) else None


def light() -> bool:
    """Whether the request being served is marked light."""
    return PRIORITY.get() == LIGHT


def bulk() -> bool:
    """Whether the request being served is the service's own bulk work."""
    return PRIORITY.get() == BULK
