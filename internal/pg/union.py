"""Statements made of one part per corpus joined by UNION ALL, run with PostgreSQL's own
`$n` placeholders.

psycopg turns `%(name)s` placeholders into `$n` with a regular expression on every
execute, and keeps the result only for statements under 4,096 bytes and 50 parameters
(`psycopg._queries.MAX_CACHED_STATEMENT_LENGTH`). A read over 16 corpora (a part a
corpus) is longer, so the conversion ran again on every search: about 1 ms of vectord's
Python per search over 16 corpora, in four such statements (py-spy). Here it is done once
per tuple of parts (cached) and the statement runs on a raw cursor, which sends it as it
is: the same statement, the same parameters and types, the same plan.

No SQL of its own: the parts are the storage modules'.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection, AsyncRawCursor
from psycopg.rows import RowFactory, tuple_row

_PLACEHOLDER = re.compile(rb"%\((\w+)\)s|%%|%s")


@functools.lru_cache(maxsize=1024)
def statement(parts: tuple[bytes, ...]) -> tuple[bytes, tuple[str, ...]]:
    """The parts joined by UNION ALL with `%(name)s` numbered `$1`.. in order of first
    use (a name used twice is one parameter), and the names in that order."""
    names: dict[str, int] = {}

    def number(m: re.Match[bytes]) -> bytes:
        if m.group(0) == b"%%":
            return b"%"
        if m.group(1) is None:
            raise ValueError("positional %s in a UNION ALL part: name it %(name)s")
        name = m.group(1).decode()
        if name not in names:
            names[name] = len(names) + 1
        return b"$%d" % names[name]

    return _PLACEHOLDER.sub(number, b" UNION ALL ".join(parts)), tuple(names)


async def fetch(conn: AsyncConnection[Any], parts: Sequence[bytes], params: Mapping[str, Any],
                *, binary: bool = False, row_factory: RowFactory[Any] = tuple_row
                ) -> list[Any]:
    """Every row of the parts' UNION ALL, with these named parameters."""
    query, names = statement(tuple(parts))
    cur = AsyncRawCursor(conn, row_factory=row_factory)
    await cur.execute(query, [params[n] for n in names], binary=binary)
    return await cur.fetchall()
