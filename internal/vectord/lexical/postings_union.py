"""BM25 over several corpora scored as one (lexical/postings.py's arithmetic over their
postings laid end to end): the union's scores, its top n, and the cache of the laid-out
parts."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from internal.vectord.lexical.postings import (
    F64,
    CorpusIndex,
    accumulate,
    term_factors,
    top_candidates,
)

Parts = tuple[npt.NDArray[np.int64], F64]  # global ordinals, per-posting BM25 factors


class UnionCache:
    """Per set of corpora (at their versions) and lexeme, the corpora's postings laid end
    to end in one ordinal space: a search over many corpora then scores each lexeme in
    one numpy pass instead of one a corpus (the per-corpus passes were most of a 16-corpus
    search's Python time). Bounded LRU; an entry is only valid for the versions and the
    (avgdl, k1, b) in its key. Within max_bytes (16 bytes a posting), least recently
    used out first."""

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._data: OrderedDict[tuple[object, ...], Parts] = OrderedDict()
        # Per set of corpora at their versions: each lexeme's document frequency summed
        # over them (feedback's expansion asks for hundreds a search).
        self._dfs: OrderedDict[tuple[object, ...], dict[str, float]] = OrderedDict()

    def dfs(self, key: tuple[object, ...]) -> dict[str, float]:
        """The summed document frequencies known for this set of corpora (filled by the
        caller); the 64 most recently used sets are kept, 20,000 lexemes each at most."""
        got = self._dfs.get(key)
        if got is None or len(got) > 20_000:
            got = self._dfs[key] = {}
            while len(self._dfs) > 64:
                self._dfs.popitem(last=False)
        self._dfs.move_to_end(key)
        return got

    def get(self, key: tuple[object, ...]) -> Parts | None:
        got = self._data.get(key)
        if got is not None:
            self._data.move_to_end(key)
        return got

    def put(self, key: tuple[object, ...], parts: Parts) -> None:
        size = int(parts[0].nbytes + parts[1].nbytes)
        if size > self.max_bytes:
            return  # larger than the whole budget: scored without keeping it
        old = self._data.pop(key, None)
        if old is not None:
            self.nbytes -= int(old[0].nbytes + old[1].nbytes)
        self._data[key] = parts
        self.nbytes += size
        while self.nbytes > self.max_bytes and self._data:
            _, gone = self._data.popitem(last=False)
            self.nbytes -= int(gone[0].nbytes + gone[1].nbytes)


def offsets(indexes: Sequence[CorpusIndex]) -> npt.NDArray[np.int64]:
    """Where each corpus's ordinals start in the union's ordinal space (one past the end
    last)."""
    return np.cumsum([0, *(len(ix.ids) for ix in indexes)], dtype=np.int64)


def union_scores(indexes: Sequence[CorpusIndex], lexemes: Sequence[str], w: Sequence[float],
                 avg: float, k1: float, b: float, cache: UnionCache) -> F64:
    """`scores` of every corpus laid end to end (field weights 1/1/1 only): the same
    additions in the same order per item, so the very same floats."""
    start = offsets(indexes)
    terms: list[tuple[npt.NDArray[np.integer], F64]] = []
    versions = tuple((ix.corpus_id, ix.version, ix.numbering, len(ix.ids)) for ix in indexes)
    for t, wt in zip(lexemes, w, strict=True):
        key = (versions, t, avg, k1, b)
        parts = cache.get(key)
        if parts is None:
            # The corpora's postings end to end, their factors computed in one pass (one
            # a corpus was most of a new lexeme's time over 16 small corpora).
            ords, tfs, dls = [], [], []
            for ix, off in zip(indexes, start.tolist(), strict=False):
                e = ix.entries.get(t)
                if e is None or e.df == 0:
                    continue
                ords.append(e.ords.astype(np.int64) + off)
                tfs.append(e.tf)
                dls.append(ix.dl[e.ords])
            parts = ((np.concatenate(ords), term_factors(np.concatenate(tfs), np.concatenate(dls),
                                                     avg, k1, b)) if ords else
                     (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)))
            cache.put(key, parts)
        if parts[0].size:
            terms.append((parts[0], wt * parts[1]))
    return accumulate(int(start[-1]), terms)


def union_top(indexes: Sequence[CorpusIndex], s: F64, n: int) -> list[tuple[int, str, float]]:
    """The n best (index position, id, score) of the union, ties by id in byte order,
    then by position: the corpora's `top` lists merged (merge.top_by_score)."""
    cand = top_candidates(s, n)
    if cand.size == 0:
        return []
    start = offsets(indexes)
    which = (np.searchsorted(start, cand, side="right") - 1).tolist()
    vals = (np.round(s[cand] * 1e12) / 1e12).tolist()
    rows = sorted((-v, indexes[wi].ids[o - int(start[wi])], wi)
                  for v, o, wi in zip(vals, cand.tolist(), which, strict=True))
    return [(wi, i, -neg) for neg, i, wi in rows[:n]]
