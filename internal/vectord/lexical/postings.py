"""The in-memory lexical index: per corpus and lexeme, packed postings; BM25 over them.

PostgreSQL stays the system of record (the postings, document-frequency and statistics
tables kept by lexical/sql_index.py's triggers). Each vectord holds a cache of it, per corpus:

- per lexeme, the ordinals of the items holding it and their term frequencies per field
  (int32 + 3 x uint16: 10 bytes a posting), or an empty entry (the lexeme is absent);
- per item ordinal, its id and its length per field (int32 x 3);
- the corpus's document count and length sums per language (its statistics rows);
- the version of the corpus these reflect (see lexical/memory_index.py for how it is kept in step);
- whether it holds every lexeme of the corpus (`whole`): then a lexeme it lacks is one the
  corpus lacks, and a new query reads nothing (small corpora are loaded whole, `fits_whole`).

Nothing here does I/O: lexical/memory_index.py loads entries and applies the change log; this module
stores them, accounts their memory and scores BM25 with numpy in float64, the same
arithmetic as the SQL reference (lexical._SCORE_POSTINGS), rounded to 1e-12 as it is, ties
broken by id in byte order.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
U16 = npt.NDArray[np.uint16]
F64 = npt.NDArray[np.float64]

# Bytes an entry costs beyond its arrays (dict slot, object, the lexeme string), and a
# posting's arrays: int32 ordinal + three uint16 term frequencies.
ENTRY_OVERHEAD = 160
POSTING_BYTES = 10
ITEM_BYTES = 12 + 120  # three int32 lengths, plus the id string and its dict slot
DOC_LEXEME_BYTES = 120  # a feedback document's lexeme: its string, a float, a dict slot
DF_BYTES = 120
# Feedback documents whose lexeme counts a corpus's index keeps (most recent first out).
DOCS_KEPT = 4096


@dataclass
class Entry:
    """One lexeme's postings in one corpus (empty arrays: the corpus does not hold it)."""

    ords: I32
    tf: npt.NDArray[np.uint16]  # shape (n, 3): title, text, tags
    # Each posting's tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) with the field
    # weights 1/1/1, for `key` = (avgdl, k1, b): the default search multiplies it by the
    # lexeme's weight and adds, one pass over the postings (recomputed when key changes).
    key: tuple[float, float, float] | None = None
    part: F64 | None = None

    @property
    def df(self) -> int:
        return int(self.ords.shape[0])

    @property
    def nbytes(self) -> int:
        """What it may hold: its postings and the scoring cache `part` (counted whether
        made yet or not, so a corpus's total is kept as entries come and go)."""
        return ENTRY_OVERHEAD + (POSTING_BYTES + 8) * self.df


EMPTY = Entry(np.zeros(0, dtype=np.int32), np.zeros((0, 3), dtype=np.uint16))


@dataclass
class Stats:
    """A corpus's BM25 statistics: documents and length sums per field, by language."""

    n: int = 0
    sums: tuple[int, int, int] = (0, 0, 0)
    languages: dict[str, int] = field(default_factory=dict)  # language -> documents


_NUMBERINGS = itertools.count()


class CorpusIndex:
    """The cached lexical index of one corpus at one version."""

    def __init__(self, corpus_id: int) -> None:
        self.corpus_id = corpus_id
        self.version = -1  # nothing applied yet
        self.stats = Stats()
        self.entries: dict[str, Entry] = {}
        self.ids: list[str] = []
        self.ord_of: dict[str, int] = {}
        self.dl: npt.NDArray[np.int32] = np.zeros((0, 3), dtype=np.int32)
        # At this version only (a new version starts them afresh, see `moved_to`): the
        # lexeme counts of documents feedback has read, and document frequencies of
        # lexemes whose postings are not held.
        self.doc_counts: dict[str, dict[str, float]] = {}
        self.dfs: dict[str, float] = {}
        # Running totals of the entries' and doc_counts' bytes (summing them on every
        # load was half of a new query's time over 16 corpora with a warm cache).
        self._entry_bytes = 0
        self._doc_lexemes = 0
        self._owner: CorpusIndex | None = None  # a view's index (its counts are kept there)
        # Every lexeme of the corpus at `version` is in `entries` (absent ones left out).
        self.whole = False
        # Which numbering of items `ids` is (a new one on `clear`, and for a new index of
        # the same corpus at the same version, as a whole load makes): UnionCache's key.
        self.numbering = next(_NUMBERINGS)

    @property
    def nbytes(self) -> int:
        return (ITEM_BYTES * len(self.ids) + self._entry_bytes
                + DOC_LEXEME_BYTES * self._doc_lexemes + DF_BYTES * len(self.dfs))

    def moved_to(self, version: int, stats: Stats) -> None:
        """This index now reflects `version` (its entries brought up to it by the caller).

        What is kept per version only is replaced by new, empty containers: a view taken
        before keeps the old ones."""
        self.version, self.stats = version, stats
        self.doc_counts, self.dfs = {}, {}
        self._doc_lexemes = 0

    def df(self, lexeme: str) -> float | None:
        """The lexeme's document frequency when this index knows it (None: ask)."""
        e = self.entries.get(lexeme)
        if e is not None:
            return float(e.df)
        if self.whole:
            return 0.0
        owner = self._owner  # a view holds its lexemes only; its index may hold them all
        if owner is not None and owner.whole and owner.version == self.version:
            e = owner.entries.get(lexeme)
            return float(e.df) if e is not None else 0.0
        return self.dfs.get(lexeme)

    def ordinal(self, item_id: str) -> int:
        """The item's ordinal, assigned on first sight."""
        o = self.ord_of.get(item_id)
        if o is None:
            o = len(self.ids)
            self.ord_of[item_id] = o
            self.ids.append(item_id)
        return o

    def put(self, lexeme: str, item_ids: Sequence[str], tf: npt.NDArray[np.uint16],
            dl: npt.NDArray[np.int32]) -> Entry:
        """Store a lexeme's postings (rows of item id, tf per field, length per field)."""
        ords = np.fromiter((self.ordinal(i) for i in item_ids), dtype=np.int32,
                           count=len(item_ids))
        if len(self.ids) > self.dl.shape[0]:
            grown = np.zeros((max(len(self.ids), 2 * self.dl.shape[0], 64), 3), dtype=np.int32)
            grown[:self.dl.shape[0]] = self.dl
            self.dl = grown
        if len(ords):
            # Every posting of an item carries its current lengths (written by one trigger).
            self.dl[ords] = dl
        entry = Entry(ords, tf) if len(ords) else EMPTY
        old = self.entries.get(lexeme)
        self._entry_bytes += entry.nbytes - (old.nbytes if old is not None else 0)
        self.entries[lexeme] = entry
        return entry

    def forget(self, lexemes: Iterable[str]) -> None:
        for t in lexemes:
            old = self.entries.pop(t, None)
            if old is not None:
                self._entry_bytes -= old.nbytes

    def clear(self) -> None:
        """Drop every entry (the change log no longer reaches back to this version).

        New containers, not cleared ones: a view taken before (`view`) keeps its own."""
        self.entries = {}
        self._entry_bytes = 0
        self.whole = False
        self.numbering = next(_NUMBERINGS)
        self.ids = []
        self.ord_of = {}
        self.dl = np.zeros((0, 3), dtype=np.int32)
        self.doc_counts, self.dfs = {}, {}
        self._doc_lexemes = 0

    def view(self, lexemes: Iterable[str]) -> CorpusIndex:
        """What one search scores with: these lexemes' entries, the items they name and
        the statistics, as they are now. A refresh that forgets or replaces entries while
        the search awaits does not change the view (entries and arrays are replaced, not
        mutated, except lengths of ordinals that a newer version rewrote)."""
        v = CorpusIndex(self.corpus_id)
        v.version, v.stats = self.version, self.stats
        v.entries = {t: self.entries[t] for t in lexemes if t in self.entries}
        v.ids, v.ord_of, v.dl = self.ids, self.ord_of, self.dl
        v.numbering = self.numbering
        v.doc_counts, v.dfs = self.doc_counts, self.dfs
        v._owner = self  # not `whole`: a view holds only the lexemes it was taken for
        return v

    def keep_doc(self, item_id: str, counts: dict[str, float]) -> None:
        """Remember a feedback document's lexeme counts, read at this index's version."""
        owner = self._owner
        if owner is not None and owner.doc_counts is self.doc_counts:
            owner.keep_doc(item_id, counts)  # the index's own (it counts their bytes)
            return
        old = self.doc_counts.get(item_id)
        self._doc_lexemes += len(counts) - (len(old) if old is not None else 0)
        self.doc_counts[item_id] = counts
        while len(self.doc_counts) > DOCS_KEPT:
            self._doc_lexemes -= len(self.doc_counts.pop(next(iter(self.doc_counts))))

    def missing(self, lexemes: Iterable[str]) -> list[str]:
        """The lexemes whose postings must be read (none when the index is whole)."""
        return [] if self.whole else [t for t in lexemes if t not in self.entries]


# A corpus is loaded whole (every lexeme's postings, in the background after a search
# used it) when its fields hold at most this many tokens, an upper bound of its postings
# (~18 bytes each in memory: 22 MB at most), and it fits in half of what the budget has
# left. Then a new query over it reads no postings and no document frequencies: over many
# small corpora that was most of a new query's time (16 tables read where one would do).
WHOLE_MAX_TOKENS = 2_000_000


def fits_whole(stats: Stats, cached_bytes: int, budget: int) -> bool:
    """Whether a corpus with these statistics is to be held whole in this cache."""
    tokens = sum(stats.sums)
    return (stats.n > 0 and tokens <= WHOLE_MAX_TOKENS
            and cached_bytes + tokens * (POSTING_BYTES + 8) <= budget // 2)


class Cache:
    """Every corpus's index in this process, within a memory budget (LRU by lexeme)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self.corpora: dict[int, CorpusIndex] = {}
        self._lru: OrderedDict[tuple[int, str], None] = OrderedDict()
        self._bytes = 0
        self.evictions = 0

    def corpus(self, corpus_id: int) -> CorpusIndex:
        idx = self.corpora.get(corpus_id)
        if idx is None:
            idx = self.corpora[corpus_id] = CorpusIndex(corpus_id)
        return idx

    def drop(self, corpus_id: int) -> None:
        self.corpora.pop(corpus_id, None)

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.corpora.values())

    def touch_all(self, indexes: Iterable[CorpusIndex], lexemes: Sequence[str]) -> None:
        """Mark the entries a search used as used now (the last ones evicted)."""
        for ix in indexes:
            for t in lexemes:
                key = (ix.corpus_id, t)
                if key in self._lru:
                    self._lru.move_to_end(key)
                elif t in ix.entries:
                    self._lru[key] = None

    def evict(self, keep: set[tuple[int, str]]) -> None:
        """Drop the least recently used entries until the cache fits its budget.

        `keep`: entries the search in progress needs; a search whose own entries exceed
        the budget keeps them (the budget is exceeded for as long as it runs)."""
        total = self.nbytes
        if total <= self.budget:
            return
        for key in list(self._lru):
            if total <= self.budget:
                break
            if key in keep:
                continue
            del self._lru[key]
            idx = self.corpora.get(key[0])
            entry = idx.entries.get(key[1]) if idx is not None else None
            if idx is not None and entry is not None:
                idx.forget([key[1]])
                idx.whole = False  # a lexeme it lacks may be one it no longer holds
                total -= entry.nbytes
                self.evictions += 1


def avgdl(stats: Sequence[Stats], weights: tuple[float, float, float]) -> tuple[float, float]:
    """(N, average weighted length) of the union of corpora, as lexical._STATS_STATIC."""
    count = ta = tb = tc = 0  # integers: their sums are exact, whatever the order
    for s in stats:
        a, b, c = s.sums
        count, ta, tb, tc = count + s.n, ta + a, tb + b, tc + c
    n, sa, sb, sc = float(count), float(ta), float(tb), float(tc)
    return n, (weights[0] * sa + weights[1] * sb + weights[2] * sc) / max(n, 1.0)


def idf_weight(n: float, df: float, qtf: float) -> float:
    """idf * qtf, as vectord_bm25_query computes it (math.log: the C library's, as ln)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * qtf


def scores(idx: CorpusIndex, lexemes: Sequence[str], w: Sequence[float], avg: float,
           k1: float, b: float, weights: tuple[float, float, float]) -> F64:
    """Every ordinal's BM25 (0: no query lexeme), not yet rounded: `top` and `rounded`
    round what they return to 1e-12 as the SQL scorer does (rounding the whole array was
    most of a search's time at 1M documents)."""
    wa, wb, wc = weights
    if weights == (1.0, 1.0, 1.0):
        key = (avg, k1, b)
        terms: list[tuple[npt.NDArray[np.integer], F64]] = []
        for t, wt in zip(lexemes, w, strict=True):
            e = idx.entries.get(t)
            if e is None or e.df == 0:
                continue
            if e.key != key or e.part is None:
                e.part = term_factors(e.tf, idx.dl[e.ords], avg, k1, b)
                e.key = key
            terms.append((e.ords, wt * e.part))
        return accumulate(len(idx.ids), terms)
    out = np.zeros(len(idx.ids), dtype=np.float64)
    for t, wt in zip(lexemes, w, strict=True):
        e = idx.entries.get(t)
        if e is None or e.df == 0:
            continue
        # Term by term in the SQL's order (no dot product: its summation order differs).
        tf = e.tf[:, 0] * wa + e.tf[:, 1] * wb + e.tf[:, 2] * wc
        d = idx.dl[e.ords]
        dl = d[:, 0] * wa + d[:, 1] * wb + d[:, 2] * wc
        part = wt * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avg))
        keep = tf > 0  # a field weighted 0 can leave a posting with no frequency
        if keep.all():
            out[e.ords] += part  # a lexeme lists each item once: no repeated index
        else:
            out[e.ords[keep]] += part[keep]
    return out


def accumulate(size: int, terms: Sequence[tuple[npt.NDArray[np.integer], F64]]) -> F64:
    """Each ordinal's sum of its terms' values (ordinals, values: one lexeme's postings,
    no ordinal twice in one), added term by term in the given order: the very floats of
    `out[ords] += values` a term at a time, in one `np.bincount` pass over the terms
    laid end to end (which adds in input order) instead of a gather and a scatter a term
    (2.5x faster: 0.18 against 0.44 ms for ten lexemes at 100,000 documents)."""
    if not terms:
        return np.zeros(size, dtype=np.float64)
    ords = np.concatenate([o for o, _ in terms])
    vals = np.concatenate([v for _, v in terms])
    # Weighted, bincount answers float64 already (astype copies nothing; typed for mypy).
    return np.bincount(ords, weights=vals, minlength=size).astype(np.float64, copy=False)


def term_factors(tf: npt.NDArray[np.uint16], dl: npt.NDArray[np.int32], avg: float, k1: float,
             b: float) -> F64:
    """Each posting's tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), fields weighted
    1/1/1 (rows: postings; columns: title, text, tags). Element by element, so the
    postings of several corpora laid end to end get the very floats of each alone."""
    tf1 = tf[:, 0] * 1.0 + tf[:, 1] * 1.0 + tf[:, 2] * 1.0
    dl1 = dl[:, 0] * 1.0 + dl[:, 1] * 1.0 + dl[:, 2] * 1.0
    out: F64 = tf1 * (k1 + 1.0) / (tf1 + k1 * (1.0 - b + b * dl1 / avg))
    return out


# Rounding to 1e-12 moves a score by at most half of that (plus float error): a candidate
# for the top n by rounded score is within this of the n-th best unrounded one.
ROUNDING_SLACK = 1e-11


def rounded(score: float) -> float:
    """A score as the SQL scorer returns it: round(x, 12)."""
    return float(np.round(score * 1e12) / 1e12)


# From this many items on, the n-th best score is first bounded from below by a sample
# (`_above_sample`): selecting among every scored item was 0.7 of a 1.9 ms search at
# 100,000 documents (0.1 ms this way); below it the plain selection costs tens of us.
_SAMPLED_FROM = 4096
_SAMPLE_STEP = 8


def _above_sample(s: F64, n: int) -> npt.NDArray[np.intp] | None:
    """`top_candidates` (no `allowed`) of a large array, or None when the sample cannot bound it.

    The n-th best of every 8th score is at most the n-th best of all, so every item scored
    at least that (less the rounding slack) holds the n best and every item tying the n-th
    once rounded: the exact cut is then made among those few, as `top_candidates` makes it."""
    sample = s[::_SAMPLE_STEP]
    scored = sample[sample > 0]
    if scored.size <= n:
        return None
    nth = scored[np.argpartition(scored, scored.size - n)[scored.size - n]]
    floor = float(nth) - ROUNDING_SLACK
    if floor <= 0:
        return None
    return _cut(s, np.flatnonzero(s >= floor), n)


def _cut(s: F64, cand: npt.NDArray[np.intp], n: int) -> npt.NDArray[np.intp]:
    """Of the candidates (ascending ordinals), the n best and every one that may tie the
    n-th once rounded (the cut by id is made after sorting)."""
    if cand.size > n:
        part = cand[np.argpartition(-s[cand], n - 1)[:n]]
        kth = s[part].min()
        cand = cand[s[cand] >= kth - ROUNDING_SLACK]
    return cand


def top_candidates(s: F64, n: int, allowed: npt.NDArray[np.bool_] | None = None
                ) -> npt.NDArray[np.intp]:
    """The ordinals that may be among the n best once rounded (scored, allowed)."""
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    if allowed is None and s.size >= _SAMPLED_FROM:
        cand = _above_sample(s, n)
        if cand is not None:
            return cand
    return _cut(s, np.flatnonzero(s > 0) if allowed is None
                else np.flatnonzero((s > 0) & allowed), n)


def top(idx: CorpusIndex, s: F64, n: int, allowed: npt.NDArray[np.bool_] | None = None
        ) -> list[tuple[str, float]]:
    """The n best (id, score) by score, ties by id in byte order, as the SQL's ORDER BY."""
    cand = top_candidates(s, n, allowed)
    if cand.size == 0:
        return []
    vals = (np.round(s[cand] * 1e12) / 1e12).tolist()
    ids = idx.ids
    rows = sorted(zip([-v for v in vals], [ids[o] for o in cand.tolist()], strict=True))
    return [(i, -neg) for neg, i in rows[:n]]


# ---- several corpora scored as one ----------------------------------------------------


