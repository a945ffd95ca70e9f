"""The corpora's own terms, for typo tolerance (lexical/typos.py): a corpus's lexemes and
their document frequencies, from its in-memory index when that holds the corpus whole,
else read from its `_lexdf` table (the most frequent `KEPT`), kept per corpus.

A vocabulary only proposes corrections (their postings are read as any query lexeme's),
so one a little behind the corpus is harmless: it is read again when the corpus's
version moved and it is older than `FRESH_SECONDS`, never on every write.
"""

from __future__ import annotations

import time
from typing import Any

from psycopg import sql

from internal.vectord.lexical import postings, sql_index, typos

KEPT = 500_000  # terms a corpus, the most frequent first
FRESH_SECONDS = 300.0
READ = "SELECT lexeme, df FROM {dfs} WHERE df > 0 AND length(lexeme) >= %(shortest)s " \
       "ORDER BY df DESC, lexeme LIMIT %(kept)s"


class Vocabularies:
    """One vectord's vocabularies, by corpus id: (version read at, when, vocabulary)."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[int, float, typos.Vocabulary]] = {}
        self.reads = 0  # vocabularies read or built (tests, /readyz)

    async def of(self, reads: Any, ix: postings.CorpusIndex,
                 whole: postings.CorpusIndex | None) -> typos.Vocabulary:
        """The corpus's vocabulary; whole: its cached index when that holds it whole."""
        kept = self._kept.get(ix.corpus_id)
        now = time.monotonic()
        if kept is not None and (kept[0] == ix.version or now - kept[1] < FRESH_SECONDS):
            return kept[2]
        if whole is not None and whole.whole:
            dfs = {t: float(e.df) for t, e in whole.entries.items()
                   if e.df > 0 and len(t) >= typos.SHORTEST}
        else:
            stmt = sql.SQL(READ).format(dfs=sql_index.dfs_table(ix.corpus_id))
            async with reads.connection() as conn:
                cur = await conn.execute(stmt, {"shortest": typos.SHORTEST, "kept": KEPT})
                dfs = {str(t): float(d) for t, d in await cur.fetchall()}
        vocab = typos.Vocabulary(dfs)
        self._kept[ix.corpus_id] = (ix.version, now, vocab)
        self.reads += 1
        return vocab

    def forget(self, corpus_id: int) -> None:
        self._kept.pop(corpus_id, None)
