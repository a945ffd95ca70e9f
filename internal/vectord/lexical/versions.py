"""The lexical versions a search checks, and what is kept by them: a corpus's version
(bumped by every write in its transaction, lexical/sql_index.py's trigger), read in batches shared
by the searches asking meanwhile (`Versions`), compared (`moved`), and the hits' rows kept
at a version (`Rows`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

# ids: an array literal (`id_array`), the statement every search runs: a str parameter
# costs psycopg 15-20 us less to send than a list of ints.
VERSIONS = """
SELECT c.id, coalesce(v.version, 0) FROM unnest(%(ids)s::text::bigint[]) AS c(id)
LEFT JOIN vectord_lex_versions v ON v.corpus_id = c.id"""


def id_array(corpus_ids: Iterable[int]) -> str:
    """Corpus ids as a PostgreSQL array literal ('{3,7}')."""
    return "{" + ",".join(str(int(i)) for i in corpus_ids) + "}"


# The version column added to a statement that reads one corpus's rows.
VERSION_OF = ("(SELECT coalesce(max(version), 0) FROM vectord_lex_versions "
              "WHERE corpus_id = %(lex_corpus_id)s) AS lex_version")


def moved(expected: dict[int, int], current: dict[int, int]) -> bool:
    """Whether a corpus's version differs from the one its scores were computed at."""
    return any(current.get(cid, v) != v for cid, v in expected.items())


async def versions_on(conn: Any, corpus_ids: Sequence[int]) -> dict[int, int]:
    """The corpora's versions now, in one statement on the caller's connection (corpus
    id -> version; 0: none yet)."""
    cur = await conn.execute(VERSIONS, {"ids": id_array(corpus_ids)})
    return {int(r[0]): int(r[1]) for r in await cur.fetchall()}


# Hit rows kept per vectord (Rows): at most this many bytes of their text fields.
ROWS_BUDGET_BYTES = 64 * 2**20


ROW_OVERHEAD = 512  # a row's dict, its id, language, timestamp and tags, roughly


class Rows:
    """Hits' rows as read with their corpus's version (search_reads.read_items), kept so
    that a search scored at that same version needs no statement for them: a row read at
    version v is the row while the corpus is at v, since every write that changes a row's
    text, tags, language, metadata or updated_at moves the version (lexical/sql_index.py's
    trigger). Bounded LRU by the size of the rows' text fields."""

    def __init__(self, budget_bytes: int = ROWS_BUDGET_BYTES) -> None:
        self.budget = budget_bytes
        self.nbytes = 0
        self.hits = 0
        self._data: OrderedDict[tuple[int, str], tuple[int, dict[str, Any], int]] = OrderedDict()

    def get(self, corpus_id: int, version: int, ids: Sequence[str]
            ) -> list[dict[str, Any]] | None:
        """Copies of the rows of every id, kept at this version; None when one is not."""
        out = []
        for i in ids:
            got = self._data.get((corpus_id, i))
            if got is None or got[0] != version:
                return None
            out.append(dict(got[1]))
        for i in ids:
            self._data.move_to_end((corpus_id, i))
        self.hits += 1
        return out

    def put(self, corpus_id: int, version: int, rows: Sequence[dict[str, Any]]) -> None:
        for row in rows:
            key = (corpus_id, str(row["id"]))
            old = self._data.pop(key, None)
            if old is not None:
                self.nbytes -= old[2]
            size = ROW_OVERHEAD + sum(len(str(row.get(f) or "")) for f in
                                      ("title", "text", "metadata"))
            self._data[key] = (version, dict(row), size)
            self.nbytes += size
        while self.nbytes > self.budget and self._data:
            _, (_, _, size) = self._data.popitem(last=False)
            self.nbytes -= size

    def drop(self, corpus_id: int) -> None:
        for key in [k for k in self._data if k[0] == corpus_id]:
            self.nbytes -= self._data.pop(key)[2]


class Versions:
    """Corpora's current versions, one statement for the searches that ask meanwhile.

    A search asks after it started, and is answered by a statement that starts after it
    asked: it joins the batch not sent yet, and a batch is sent when the one before it has
    answered. So a write acknowledged before the search started is seen, as with a
    statement of its own; under concurrent searches one round trip answers several."""

    def __init__(self) -> None:
        self._next: asyncio.Future[dict[int, int]] | None = None
        self._ids: set[int] = set()
        self._sender: asyncio.Task[None] | None = None
        self.statements = 0

    async def current(self, reads: Any, corpus_ids: Sequence[int]) -> dict[int, int]:
        loop = asyncio.get_running_loop()
        if self._sender is not None and self._sender.get_loop() is not loop:
            self._next, self._sender = None, None  # an app moved to another loop (tests)
        if self._next is None:
            self._next = loop.create_future()
            self._ids = set()
        fut = self._next
        self._ids.update(corpus_ids)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(reads))
        got = await asyncio.shield(fut)
        return {cid: got[cid] for cid in corpus_ids}

    async def _send(self, reads: Any) -> None:
        """Batch after batch on one connection, held while batches keep coming (taking
        it from the pool for each was a sixth of the statement's CPU under load)."""
        while self._next is not None:
            fut: asyncio.Future[dict[int, int]] | None = None
            try:
                async with reads.connection() as conn:
                    while self._next is not None:
                        fut, ids = self._next, sorted(self._ids)
                        self._next = None
                        got = await versions_on(conn, ids)
                        self.statements += 1
                        fut.set_result(got)
                        fut = None
            except BaseException as exc:  # every search of the batch sees the failure
                if fut is None:  # no batch in flight (taking the connection failed): the
                    # waiting one fails, else a server down would be retried in a loop
                    fut, self._next = self._next, None
                if fut is not None and not fut.done():
                    fut.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise

    async def close(self) -> None:
        task, self._sender = self._sender, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        fut, self._next = self._next, None
        if fut is not None and not fut.done():
            fut.cancel()
