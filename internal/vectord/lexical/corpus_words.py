"""A corpus's stored words stemmed ahead of its highlights (marks.learn), in the background.

A highlight marks words by their lexemes, which PostgreSQL stems (lexical/marks.py); a word no
highlight needed before costs one statement a search (shaping_sql.LEXEMES_OF). When a
corpus's lexical index is loaded whole (lexical/memory_index.py), its stored titles' and texts' word
parts are read, counted and stemmed by PostgreSQL in one statement, per item language,
and learnt: a highlight of that corpus then needs no statement, except for words written
since (which fall back to LEXEMES_OF). The words are split in SQL (`[^[:alnum:]]+`), which
may read a word otherwise than marks._WORD (accents under a C collation): such a word
is only left unknown, and correctness never depends on this table being complete (the
marks are proven by the index's term frequencies either way).

Bounded: at most `KEPT` words of a language a corpus, the most frequent first (marks.KEPT
is the table's size; the other half stays for the words searches learn). A failure is
logged and the highlights go on as before; never awaited by a search.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from psycopg import sql

from internal.common import waits
from internal.vectord import tables
from internal.vectord.lexical import marks

log = structlog.get_logger()

KEPT = marks.KEPT // 2  # words a language a corpus: the table keeps room for the searches'

# Each word part of the corpus's titles and texts (lower-cased, split where
# marks._WORD splits, but for accents the collation may not class as letters), counted
# per item language, the most frequent `kept` of each, with its lexeme as LEXEMES_OF
# computes it; "simple" is left out (its lexeme is the word itself, marks never looks it up).
WORDS = """
WITH w AS (
  SELECT i.language, w, count(*) AS n
  FROM {items} i,
       regexp_split_to_table(lower(coalesce(i.title, '') || ' ' || i.text), '[^[:alnum:]]+') w
  WHERE w <> '' AND i.language <> 'simple'::regconfig
  GROUP BY 1, 2),
r AS (
  SELECT language, w, count(*) OVER (PARTITION BY language) AS distinct_words,
         row_number() OVER (PARTITION BY language ORDER BY n DESC, w) AS rank
  FROM w)
SELECT language::text, w, distinct_words,
       (SELECT CASE WHEN count(*) = 1 THEN min(lexeme) ELSE '' END
        FROM unnest(to_tsvector(language, w)))
FROM r WHERE rank <= %(kept)s"""


async def corpus_lexemes(reads: Any, corpus_id: int, kept: int = KEPT
                         ) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
    """Per language, the corpus's most frequent `kept` words and their lexemes, and how
    many distinct words each language has."""
    stmt = sql.SQL(WORDS).format(items=tables.items_table(corpus_id))
    out: dict[str, dict[str, str]] = {}
    distinct: dict[str, int] = {}
    async with reads.connection() as conn, conn.transaction():
        # One core: a parallel plan took both of a small machine's from the searches.
        await conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        cur = await conn.execute(stmt, {"kept": kept})
        while rows := await cur.fetchmany(WORDS_SLICE):
            for language, word, n, lexeme in rows:
                out.setdefault(language, {})[word] = lexeme or ""
                distinct[language] = int(n)
            await asyncio.sleep(0)  # the loop serves searches between slices
    return out, distinct


WORDS_SLICE = 4096
# Corpora and words learnt since start, and learnings failed (tests, the log's readers).
LEARNT = {"corpora": 0, "words": 0, "failures": 0}


class Learner:
    """Learns the words of the corpora loaded whole, one at a time, in one task; each
    corpus once a process: a corpus written to is loaded whole again at each new version,
    and reading all its words again for the few a write brings would cost the whole scan
    each time (those few fall back to LEXEMES_OF)."""

    def __init__(self) -> None:
        self._queue: list[tuple[int, int]] = []  # (corpus id, version loaded)
        self._done: set[int] = set()  # corpus ids learnt
        self._task: asyncio.Task[None] | None = None

    def later(self, reads: Any, corpus_id: int, version: int) -> None:
        """Learn the corpus's words unless they are learnt or queued already."""
        if corpus_id in self._done or any(c == corpus_id for c, _ in self._queue):
            return
        self._queue.append((corpus_id, version))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(reads))

    async def _run(self, reads: Any) -> None:
        while self._queue:
            cid, version = self._queue[0]
            try:
                await self._learn(reads, cid, version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reported; highlights stem their words as before
                LEARNT["failures"] += 1
                log.warning("corpus_words_failed", corpus_id=cid, error=str(exc))
            finally:
                self._queue.pop(0)

    async def _learn(self, reads: Any, cid: int, version: int) -> None:
        t0 = time.perf_counter()
        tables, distinct = await corpus_lexemes(reads, cid)
        for language, table in tables.items():
            marks.learn(language, table)
            if distinct[language] > len(table):
                log.info("corpus_words_bounded", corpus_id=cid, language=language,
                         words=distinct[language], learnt=len(table))
        self._done.add(cid)
        n = sum(len(t) for t in tables.values())
        LEARNT["corpora"] += 1
        LEARNT["words"] += n
        log.info("corpus_words_learnt", corpus_id=cid, version=version, words=n,
                 languages=len(tables), ms=round((time.perf_counter() - t0) * 1000, 1))

    async def close(self) -> None:
        """Stop learning (on shutdown)."""
        task, self._task = self._task, None
        await waits.stop(task)
