"""Keeps this vectord's in-memory lexical index (lexical/postings.py) in step with PostgreSQL.

Every write to a corpus's items bumps the corpus's version in its transaction and logs
the lexemes it touched (sql_index.py's trigger; versions are gapless in commit order). A
search reads the versions of the corpora it searches in the statement that also turns
its text into lexemes (one round trip); when the cache is at those versions and holds
every query lexeme, nothing else is read. Otherwise one REPEATABLE READ transaction (one
snapshot) reads the change log since the cached version (the lexemes it names are
forgotten; a gap, or a version older than the log keeps, forgets the whole corpus), the
statistics rows, and the postings of the lexemes not cached. So a write acknowledged
before a search starts is seen by it, on any replica that has replayed it, and BM25 is
computed from one consistent state per corpus.

The reads here are SQL only; the arithmetic is lexical/postings.py's.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog
from psycopg import sql

from internal.api.vectord import Corpus
from internal.common import language, waits
from internal.pg import union
from internal.vectord.lexical import corpus_words, postings, sql_index, vocabulary
from internal.vectord.lexical.postings_union import UnionCache
from internal.vectord.lexical.versions import VERSIONS, Rows, Versions, id_array

log = structlog.get_logger()

# The versions of the corpora and the query's terms (lexical/functions.sql's
# vectord_query_terms: its lexemes in each language, the question language's stop words
# left out of the others) in one statement.
QUERY = """
SELECT ARRAY(SELECT coalesce(v.version, 0)
             FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS c(id, o)
             LEFT JOIN vectord_lex_versions v ON v.corpus_id = c.id ORDER BY c.o),
       t.lexemes, t.qtf
FROM (SELECT array_agg(q.lexeme) AS lexemes, array_agg(q.qtf) AS qtf
      FROM vectord_query_terms(%(langs)s::regconfig[], %(ql)s::regconfig, %(q)s) q) t"""


def query_terms(lexemes: Sequence[str] | None, qtf: Sequence[float] | None
                ) -> tuple[list[str], list[float]]:
    """QUERY's terms in lexeme order (code points, as the postings' COLLATE "C")."""
    pairs = sorted(zip(lexemes or [], qtf or [], strict=True))
    return [t for t, _ in pairs], [float(n) for _, n in pairs]


_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


def tsvector_counts(text: str) -> dict[str, float]:
    """A tsvector's (text form) lexemes and each one's count of positions (1 without)."""
    out: dict[str, float] = {}
    for lexeme, positions in _LEXEME.findall(text):
        if "'" in lexeme or "\\" in lexeme:
            lexeme = lexeme.replace("''", "'").replace("\\\\", "\\")
        out[lexeme] = float(positions.count(",") + 1) if positions else 1.0
    return out


def parse_tsvector(texts: Sequence[str]) -> tuple[list[str], list[float]]:
    """The lexemes of tsvectors (text form) and each one's count of positions, the largest
    over the vectors (as vectord_bm25_query's max(cardinality(positions))), lexeme order."""
    qtf: dict[str, float] = {}
    for text in texts:
        for lexeme, n in tsvector_counts(text).items():
            qtf[lexeme] = max(qtf.get(lexeme, 0.0), n)
    lexemes = sorted(qtf)
    return lexemes, [qtf[t] for t in lexemes]


CHANGES = """
SELECT version, lexemes FROM vectord_lex_changes
WHERE corpus_id = %(id)s AND version > %(since)s AND version <= %(until)s"""

STATS = "SELECT language::text, n, sum_a, sum_b, sum_c FROM {stats}"

# A lexeme's postings as one row: ids, and term frequencies and lengths packed big-endian
# (int2send / int4send), so the client decodes them with numpy instead of row by row.
_PACKED = """lexeme, array_agg(item_id),
       string_agg(int2send(tf_a) || int2send(tf_b) || int2send(tf_c), ''::bytea),
       string_agg(int4send(dl_a) || int4send(dl_b) || int4send(dl_c), ''::bytea)"""
POSTINGS = ("(SELECT {cid}::bigint, " + _PACKED + """
FROM {postings} WHERE lexeme = ANY({lexemes}::text[]) GROUP BY lexeme)""")
# Every lexeme's postings of a corpus (a whole load).
WHOLE = "SELECT " + _PACKED + " FROM {postings} GROUP BY lexeme"


@dataclass
class Prepared:
    """What a search scores with: a view of each corpus's index (postings.CorpusIndex.view)
    and the union's statistics."""

    indexes: list[postings.CorpusIndex]
    stats: sql_index.QueryStats | None  # None: no query lexeme in any corpus
    # False: scored from the cache as it stands, the versions not read yet; the search
    # must read them in a later statement and start again if any moved (`moved`).
    checked: bool = True
    # Every query lexeme and its count, held by a corpus or not (typo tolerance's input).
    terms: tuple[list[str], list[float]] = ([], [])

    @property
    def versions(self) -> dict[int, int]:
        """The version of each corpus these views are at (corpus id -> version)."""
        return {ix.corpus_id: ix.version for ix in self.indexes}


# How a question is analysed: the languages it is stemmed in, and its own language
# (vectord_query_terms' `ql`; None: every lexeme counts).
Analysis = tuple[tuple[str, ...], str | None]

# A query text's lexemes per analysis, kept for texts searched again: the terms depend on
# the text and the analysis only, so a repeated text needs no round trip to turn it into
# lexemes.
PARSED_KEPT = 10_000


class LexIndex:
    """The cache of one vectord, and the lock that serialises its refreshes."""

    def __init__(self, budget_bytes: int) -> None:
        # Postings of several corpora laid end to end, for searches over many (lexical/postings.py).
        self.unions = UnionCache()
        self.cache = postings.Cache(budget_bytes)
        self._parsed: OrderedDict[tuple[Analysis, str], tuple[list[str], list[float]]] = (
            OrderedDict())
        self._lock = asyncio.Lock()
        self.loads = 0  # lexeme entries read from PostgreSQL (tests, metrics)
        self.refreshes = 0
        self.from_cache = 0  # searches scored before reading the versions (checked after)
        # Corpora to load whole (postings.fits_whole), one at a time in the background.
        self._whole_queue: list[int] = []
        self._whole_task: asyncio.Task[None] | None = None
        self._whole_failed: dict[int, float] = {}  # corpus id -> when its load failed
        self.whole_loads = 0
        self.rows = Rows()
        self.versions = Versions()
        self.words = corpus_words.Learner()  # a whole corpus's words stemmed for highlights
        self.vocabularies = vocabulary.Vocabularies()  # the corpora's terms, for typos

    async def prepare(self, reads: Any, corpora: Sequence[Corpus], text: str,
                      fixed: Sequence[str], auto: Sequence[bool],
                      weights: tuple[float, float, float], *, trust: bool = False
                      ) -> Prepared:
        """The corpora's indexes, current and holding the query's lexemes, and the union's
        BM25 statistics (as sql_index.UNION_STATS would compute them).

        trust: when the text was searched before and the cache holds its lexemes for every
        corpus, score from the cache with no round trip and leave the versions to the
        caller (Prepared.checked False); otherwise (and always when not trust) read them
        first, in the statement that turns the text into lexemes."""
        ids = [c.id for c in corpora]
        idx = [self.cache.corpus(i) for i in ids]
        langs = self._languages(idx, fixed, auto)
        known = self._parsed.get((langs, text)) if trust else None
        if known is not None and all(ix.version >= 0 and not ix.missing(known[0])
                                     for ix in idx):
            self._parsed.move_to_end((langs, text))
            self.from_cache += 1
            lexemes, qtf = known
            self.cache.touch_all(idx, lexemes)
            views = [ix.view(lexemes) for ix in idx]
            self._whole_later(reads, idx)
            return Prepared(views, query_stats(views, lexemes, qtf, weights), checked=False,
                            terms=(lexemes, qtf))
        async with reads.connection() as conn:
            cur = await conn.execute(QUERY, {"ids": ids, "langs": list(langs[0]),
                                             "ql": langs[1], "q": text})
            row = await cur.fetchone()
        assert row is not None
        versions = [int(v) for v in row[0] or []]
        lexemes, qtf = query_terms(row[1], row[2])
        self._remember(langs, text, lexemes, qtf)
        if any(ix.version != v for ix, v in zip(idx, versions, strict=True)) or any(
                ix.missing(lexemes) for ix in idx):
            lexemes, qtf = await self._refresh(reads, idx, text, fixed, auto, langs,
                                               lexemes, qtf)  # marks them used
        else:
            self.cache.touch_all(idx, lexemes)
        views = [ix.view(lexemes) for ix in idx]
        self._whole_later(reads, idx)
        return Prepared(views, query_stats(views, lexemes, qtf, weights), terms=(lexemes, qtf))

    async def ensure(self, reads: Any, corpus_ids: Sequence[int], lexemes: Sequence[str]
                     ) -> list[postings.CorpusIndex]:
        """Views holding these lexemes (feedback's expanded query), loaded where not
        cached, at the cached versions when still current (else moved forward first)."""
        idx = [self.cache.corpus(i) for i in corpus_ids]
        if any(ix.missing(lexemes) for ix in idx):
            await self._refresh(reads, idx, None, [], [], ((), None), list(lexemes),
                                [])  # marks them
        else:
            self.cache.touch_all(idx, lexemes)
        return [ix.view(lexemes) for ix in idx]

    def _remember(self, langs: Analysis, text: str, lexemes: list[str],
                  qtf: list[float]) -> None:
        self._parsed[(langs, text)] = (lexemes, qtf)
        self._parsed.move_to_end((langs, text))
        while len(self._parsed) > PARSED_KEPT:
            self._parsed.popitem(last=False)

    def forget(self, corpus_id: int) -> None:
        self.cache.drop(corpus_id)
        self.rows.drop(corpus_id)
        self.vocabularies.forget(corpus_id)

    def _whole_later(self, reads: Any, idx: Sequence[postings.CorpusIndex]) -> None:
        """Queue the corpora of a search that are small enough to hold whole (and are not
        yet), for the background loader."""
        cached: int | None = None
        now = time.monotonic()
        for ix in idx:
            # The cache's index, not the search's: a whole load may have replaced it since.
            ix = self.cache.corpora.get(ix.corpus_id, ix)
            if (ix.whole or ix.version < 0 or ix.corpus_id in self._whole_queue
                    or now - self._whole_failed.get(ix.corpus_id, -WHOLE_RETRY_S) < WHOLE_RETRY_S):
                continue
            if not postings.fits_whole(ix.stats, 0, self.cache.budget):
                continue  # too large whatever the cache holds (no sum of its size)
            cached = self.cache.nbytes if cached is None else cached
            if postings.fits_whole(ix.stats, cached, self.cache.budget):
                self._whole_queue.append(ix.corpus_id)
        if self._whole_queue and (self._whole_task is None or self._whole_task.done()):
            self._whole_task = asyncio.create_task(self._load_queued(reads))

    async def _load_queued(self, reads: Any) -> None:
        while self._whole_queue:
            cid = self._whole_queue[0]
            try:
                cached = self.cache.corpora.get(cid)
                if cached is not None and not cached.whole:
                    await self._load_whole(reads, cid)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reported; the corpus stays read lexeme by lexeme
                log.warning("lexical_whole_load_failed", corpus_id=cid, error=str(exc))
                self._whole_failed[cid] = time.monotonic()
            finally:
                self._whole_queue.remove(cid)

    async def close(self) -> None:
        """Stop the background loader (on shutdown)."""
        task, self._whole_task = self._whole_task, None
        await waits.stop(task)
        await self.words.close()
        await self.versions.close()

    async def _load_whole(self, reads: Any, corpus_id: int) -> None:
        """Read every lexeme of a corpus in one snapshot into a new index, then put it in
        place of the cached one unless that is already at a newer version. Searches go on
        meanwhile: the rows are decoded a slice at a time, and a search that took the old
        index before the swap keeps it (its views and versions are its own)."""
        whole = postings.CorpusIndex(corpus_id)
        async with reads.connection() as conn:
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                cur = await conn.execute(VERSIONS, {"ids": id_array([corpus_id])})
                row = await cur.fetchone()
                assert row is not None
                whole.moved_to(int(row[1]), await _stats(conn, corpus_id))
                cur = conn.cursor(binary=True)
                await cur.execute(_whole_sql(corpus_id))
                while rows := await cur.fetchmany(WHOLE_SLICE):
                    for lexeme, ids, tf, dl in rows:
                        whole.put(str(lexeme), ids, *_decode(tf, dl))
                    await asyncio.sleep(0)  # the loop serves searches between slices
                await conn.execute("COMMIT")
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
        async with self._lock:  # not while a refresh is applying to the cached index
            cached = self.cache.corpora.get(corpus_id)
            if cached is None or cached.version > whole.version:
                return  # dropped meanwhile, or moved past this snapshot: stays as it is
            whole.whole = True
            self.cache.corpora[corpus_id] = whole
            self.whole_loads += 1
            log.info("lexical_corpus_held_whole", corpus_id=corpus_id, version=whole.version,
                     lexemes=len(whole.entries), mb=round(whole.nbytes / 2**20, 1))
            self.cache.touch_all([whole], list(whole.entries))
            self.cache.evict(set())
        self.words.later(reads, corpus_id, whole.version)

    def status(self, engine: str) -> dict[str, Any]:
        """What /readyz shows of the in-memory index."""
        c = self.cache
        return {"status": "ok", "engine": engine, "corpora": len(c.corpora),
                "whole": sum(1 for ix in c.corpora.values() if ix.whole),
                "whole_loads": self.whole_loads,
                "lexemes": sum(len(ix.entries) for ix in c.corpora.values()),
                "mb": round(c.nbytes / 2**20, 1), "budget_mb": round(c.budget / 2**20),
                "loads": self.loads, "refreshes": self.refreshes,
                "from_cache": self.from_cache, "evictions": c.evictions,
                "rows_mb": round(self.rows.nbytes / 2**20, 1), "rows_hits": self.rows.hits}

    def _languages(self, idx: Sequence[postings.CorpusIndex], fixed: Sequence[str],
                   auto: Sequence[bool]) -> Analysis:
        """The fixed languages plus those the `auto` corpora hold items in, and the
        question's language (the dominant one of all the corpora's items)."""
        return self._languages_after(idx, fixed, auto, {})

    async def _refresh(self, reads: Any, idx: list[postings.CorpusIndex], text: str | None,
                       fixed: Sequence[str], auto: Sequence[bool], langs: Analysis,
                       lexemes: list[str], qtf: list[float]) -> tuple[list[str], list[float]]:
        """Bring the indexes to one snapshot's versions and load what the query needs."""
        async with self._lock, reads.connection() as conn:
            self.refreshes += 1
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                cur = await conn.execute(VERSIONS, {"ids": id_array(ix.corpus_id for ix in idx)})
                current = {int(r[0]): int(r[1]) for r in await cur.fetchall()}
                forget: dict[int, list[str] | None] = {}  # None: the whole corpus
                stats: dict[int, postings.Stats] = {}
                for ix in idx:
                    v = current[ix.corpus_id]
                    if ix.version == v or ix.corpus_id in stats:
                        continue
                    forget[ix.corpus_id] = await _changes(conn, ix, v)
                    stats[ix.corpus_id] = await _stats(conn, ix.corpus_id)
                # The languages of `auto` corpora may have changed with the statistics.
                if text is not None:
                    held = self._languages_after(idx, fixed, auto, stats)
                    if held != langs:
                        cur = await conn.execute(QUERY, {"ids": [], "langs": list(held[0]),
                                                         "ql": held[1], "q": text})
                        row = await cur.fetchone()
                        assert row is not None
                        lexemes, qtf = query_terms(row[1], row[2])
                        self._remember(held, text, lexemes, qtf)
                wants: dict[int, list[str]] = {}
                for ix in idx:
                    gone = forget.get(ix.corpus_id, [])
                    if gone is None:
                        want = list(lexemes)
                    elif ix.whole:  # kept whole at the new version: what writes touched
                        want = sorted(set(gone))
                    else:
                        want = [t for t in lexemes if t not in ix.entries or t in set(gone)]
                    if want and ix.corpus_id not in wants:
                        wants[ix.corpus_id] = want
                loads = await _postings(conn, wants) if wants else {}
                await conn.execute("COMMIT")
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
        # Applied in one synchronous step: no search sees a half-updated index.
        for ix in idx:
            if ix.corpus_id in forget:
                gone = forget[ix.corpus_id]
                if gone is None:
                    ix.clear()
                else:
                    ix.forget(gone)
                ix.moved_to(current[ix.corpus_id], stats[ix.corpus_id])
        by_id = {ix.corpus_id: ix for ix in idx}  # not the cache's: a whole load may replace it
        for cid, rows in loads.items():
            ix = by_id[cid]
            for lexeme, (item_ids, tf, dl) in rows:
                ix.put(lexeme, item_ids, tf, dl)
                self.loads += 1
        keep = {(ix.corpus_id, t) for ix in idx for t in lexemes}
        self.cache.touch_all(idx, lexemes)
        self.cache.evict(keep)
        return lexemes, qtf

    def _languages_after(self, idx: Sequence[postings.CorpusIndex], fixed: Sequence[str],
                         auto: Sequence[bool], stats: dict[int, postings.Stats]) -> Analysis:
        langs = set(fixed)
        counts: Counter[str] = Counter()
        for ix, a in zip(idx, auto, strict=True):
            st = stats.get(ix.corpus_id, ix.stats)
            held = {lang: n for lang, n in st.languages.items() if n > 0}
            counts.update(held)
            if a:
                langs.update(held)
        return tuple(sorted(langs)), language.question_language(counts)


async def _changes(conn: Any, ix: postings.CorpusIndex, until: int) -> list[str] | None:
    """The lexemes versions (cached, until] touched; None when the log cannot say."""
    since = ix.version
    if since < 0 or until < since or until - since > sql_index.CHANGES_KEPT:
        return None  # never loaded, behind this snapshot (another replica), or too old
    cur = await conn.execute(CHANGES, {"id": ix.corpus_id, "since": since, "until": until})
    rows = await cur.fetchall()
    if len(rows) != until - since or any(not r[1] for r in rows):
        return None  # a gap, or a write that touched too many lexemes to list them
    return sorted({t for r in rows for t in r[1]})


async def _stats(conn: Any, corpus_id: int) -> postings.Stats:
    cur = await conn.execute(sql.SQL(STATS).format(stats=sql_index.stats_table(corpus_id)))
    st = postings.Stats()
    a = b = c = 0
    for lang, n, sa, sb, sc in await cur.fetchall():
        st.n += int(n)
        a, b, c = a + int(sa), b + int(sb), c + int(sc)
        st.languages[str(lang)] = int(n)
    st.sums = (a, b, c)
    return st


async def _postings(conn: Any, wants: dict[int, list[str]]
                    ) -> dict[int, list[tuple[str, Any]]]:
    """Each corpus's wanted lexemes' postings as (item ids, tf per field, length per
    field), read in one statement for every corpus (one round trip, not one a corpus: a
    new query over 16 corpora spent most of its time on 16 sequential reads); an absent
    lexeme comes back empty (cached as absent)."""
    parts = tuple(sorted(wants))
    rows = await union.fetch(conn, [_postings_part(cid) for cid in parts],
                             {f"lexemes_{cid}": wants[cid] for cid in parts}, binary=True)
    out: dict[int, list[tuple[str, Any]]] = {cid: [] for cid in parts}
    # Decoded in one pass for every row (per row it was most of the decoding's time over
    # 16 corpora); each entry keeps a copy of its own slice, so evicting it frees it.
    tfs, dls = _decode(b"".join(r[3] for r in rows), b"".join(r[4] for r in rows))
    at = 0
    for cid, lexeme, ids, _, _ in rows:
        n = len(ids)
        out[int(cid)].append((str(lexeme), (ids, tfs[at:at + n].copy(), dls[at:at + n])))
        at += n
    empty = (np.zeros((0, 3), dtype=np.uint16), np.zeros((0, 3), dtype=np.int32))
    for cid, rows in out.items():
        found = {t for t, _ in rows}
        rows.extend((t, ([], *empty)) for t in wants[cid] if t not in found)
    return out


def _decode(tf: bytes, dl: bytes) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int32]]:
    """Packed term frequencies and lengths (three a posting, big-endian) as arrays."""
    return (np.frombuffer(tf, dtype=">u2").astype(np.uint16).reshape(-1, 3),
            np.frombuffer(dl, dtype=">i4").astype(np.int32).reshape(-1, 3))


# Rows of a whole load decoded between two turns of the event loop; seconds before a
# corpus whose whole load failed is tried again.
WHOLE_SLICE = 256
WHOLE_RETRY_S = 60.0


@functools.lru_cache(maxsize=4096)
def _whole_sql(corpus_id: int) -> bytes:
    """Every lexeme's postings of one corpus, a row a lexeme (as POSTINGS)."""
    return sql.SQL(WHOLE).format(postings=sql_index.postings_table(corpus_id)).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def _postings_part(corpus_id: int) -> bytes:
    """One corpus's part of the postings read, rendered once."""
    return sql.SQL(POSTINGS).format(
        postings=sql_index.postings_table(corpus_id), cid=sql.Literal(int(corpus_id)),
        lexemes=sql.Placeholder(f"lexemes_{int(corpus_id)}")).as_bytes(None)


def query_stats(idx: Sequence[postings.CorpusIndex], lexemes: Sequence[str],
                qtf: Sequence[float], weights: tuple[float, float, float]
                ) -> sql_index.QueryStats | None:
    """The union's BM25 query side from the cached indexes (sql_index.QueryStats order:
    rarest first; lexemes no corpus holds left out)."""
    n, avg = postings.avgdl([ix.stats for ix in idx], weights)
    held = [ix.entries for ix in idx]
    rows = []
    for t, q in zip(lexemes, qtf, strict=True):
        count = 0
        for entries in held:
            e = entries.get(t)
            if e is not None:
                count += e.df
        if count > 0:
            df = float(count)
            rows.append((df, t, postings.idf_weight(n, df, q)))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    return sql_index.QueryStats(lexemes=[t for _, t, _ in rows], weights=[w for _, _, w in rows],
                              dfs=[d for d, _, _ in rows], avgdl=avg, n=n)
