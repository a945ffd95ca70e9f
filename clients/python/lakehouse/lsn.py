"""WAL positions on the wire: the `Lakehouse-LSN` header of writes and of searches.

In the client distribution because the client sends and reads the header; the daemons
use it through internal.common.lsn."""

from __future__ import annotations

import re
from contextvars import ContextVar

from lakehouse.errors import InvalidArgument

# On every write's answer: the primary's WAL position after the commit (e.g. "0/1A2B3C8").
# A search sending it back is answered from data that holds that write; a backup or read
# replica at or past it holds the write.
LSN_HEADER = "Lakehouse-LSN"
_LSN = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")

# The position the request being served must see (set by the web middleware from the
# header; forwarded by the daemon clients on every call they make for it).
REQUEST_LSN: ContextVar[str | None] = ContextVar("request_lsn", default=None)


# The WAL positions of the writes made on behalf of the request being served (a box per
# request, set by the web middleware, filled by the daemon clients from their answers):
# the request's own answer carries the highest, so a write made through matrixd or syncd
# answers with its position too.
WRITTEN: ContextVar[list[int] | None] = ContextVar("written_lsns", default=None)


def note_written(header: str | None) -> None:
    """Remember a daemon's Lakehouse-LSN answer for the request being served."""
    box = WRITTEN.get()
    if box is None or not header:
        return
    try:
        box.append(parse_lsn(header))
    except InvalidArgument:
        pass  # a daemon's malformed header is not the caller's fault: left out


def parse_lsn(text: str, field: str = LSN_HEADER) -> int:
    """A WAL position ("16/B374D848") as a number; a 400 naming `field` if it is not one."""
    m = _LSN.match(text.strip())
    if m is None:
        raise InvalidArgument(f"{field}: not a WAL position like 0/1A2B3C8: {text[:40]!r}",
                              field=field)
    return (int(m.group(1), 16) << 32) | int(m.group(2), 16)


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
