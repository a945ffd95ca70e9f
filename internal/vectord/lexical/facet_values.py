"""Facet values held in memory (no I/O): per corpus and facet field, each item's values by
the in-memory lexical index's ordinals, so that a facet over a query's match set (the
items holding one of its lexemes: the index's postings) is one numpy count, not a read
of every matching row.

A corpus's values are kept at one version of the corpus (lexical/versions.py: every write
that changes a row moves it), for the numbering of ordinals of one index
(postings.CorpusIndex.numbering), and only for an index holding the whole corpus, whose
ordinals then name every item that holds a lexeme (an item without one is in no match
set). A version or numbering other than the search's: not used (shaping/facet_counts.py reads
them again, or counts with a statement).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
KEPT = 256  # (corpus, field) entries held; the least recently used goes first


@dataclass(frozen=True)
class Values:
    """One field's values of one corpus: those of ordinal o are
    vocab[values[offsets[o]:offsets[o + 1]]]."""

    version: int
    numbering: int
    offsets: I64
    values: I32
    vocab: list[str]

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.values.nbytes) + 64 * len(self.vocab)


def build(version: int, numbering: int, ord_of: Mapping[str, int],
          rows: Iterable[tuple[str, Sequence[str] | None]]) -> Values:
    """Values from (item id, its values) rows read at `version` (items the numbering has
    no ordinal for are left out: they hold no lexeme)."""
    n = len(ord_of)
    per: dict[int, list[int]] = {}
    vocab: dict[str, int] = {}
    for item_id, values in rows:
        o = ord_of.get(item_id)
        if o is None or o >= n or not values:
            continue
        per[o] = [vocab.setdefault(v, len(vocab)) for v in values if v is not None]
    lengths = np.zeros(n, dtype=np.int64)
    for o, vs in per.items():
        lengths[o] = len(vs)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.zeros(int(offsets[-1]), dtype=np.int32)
    for o, vs in per.items():
        flat[offsets[o]:offsets[o + 1]] = vs
    return Values(version, numbering, offsets, flat, list(vocab))


def count(v: Values, ords: I32) -> list[tuple[str, int]]:
    """(value, how many of these items hold it; an item's repeated value counts again)."""
    ords = ords[ords < v.offsets.shape[0] - 1]
    starts = v.offsets[ords]
    lengths = v.offsets[ords + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return []
    # Each item's run of values, laid end to end: start of its run + place in the run.
    idx = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)
    counts = np.bincount(v.values[idx], minlength=len(v.vocab))
    return [(v.vocab[i], int(counts[i])) for i in np.flatnonzero(counts)]


class Cache:
    """The values held, by (corpus id, field); bounded by entries."""

    def __init__(self) -> None:
        self._data: OrderedDict[tuple[int, str], Values] = OrderedDict()
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}

    def lock(self, corpus_id: int, field: str) -> asyncio.Lock:
        """Held while a field's values are read, so concurrent searches read them once."""
        return self._locks.setdefault((corpus_id, field), asyncio.Lock())

    def get(self, corpus_id: int, field: str, version: int, numbering: int) -> Values | None:
        """The values at this version and numbering, if held."""
        got = self._data.get((corpus_id, field))
        if got is None or got.version != version or got.numbering != numbering:
            return None
        self._data.move_to_end((corpus_id, field))
        return got

    def put(self, corpus_id: int, field: str, values: Values) -> None:
        self._data[(corpus_id, field)] = values
        self._data.move_to_end((corpus_id, field))
        while len(self._data) > KEPT:
            self._data.popitem(last=False)

    def forget(self, corpus_id: int) -> None:
        for key in [k for k in self._data if k[0] == corpus_id]:
            del self._data[key]
        for key in [k for k in self._locks if k[0] == corpus_id]:
            del self._locks[key]
