"""The in-memory lexical index keeps its size as a running total (postings.CorpusIndex):
it must equal the size summed from scratch after any sequence of loads, replacements,
forgets, evictions, feedback documents (kept through a search's view) and clears."""

from __future__ import annotations

import numpy as np

from internal.vectord.lexical import postings


def _summed(ix: postings.CorpusIndex) -> int:
    docs = sum(len(c) for c in ix.doc_counts.values())
    return (postings.ITEM_BYTES * len(ix.ids) + sum(e.nbytes for e in ix.entries.values())
            + postings.DOC_LEXEME_BYTES * docs + postings.DF_BYTES * len(ix.dfs))


def _put(ix: postings.CorpusIndex, lexeme: str, n: int) -> None:
    ids = [f"d{i}" for i in range(n)]
    ix.put(lexeme, ids, np.ones((n, 3), dtype=np.uint16), np.ones((n, 3), dtype=np.int32))


def test_the_running_size_equals_the_summed_size() -> None:
    cache = postings.Cache(budget_bytes=1 << 30)
    ix = cache.corpus(1)
    _put(ix, "a", 10)
    _put(ix, "b", 0)  # absent lexeme: cached as absent
    _put(ix, "a", 25)  # replaced
    assert ix.nbytes == _summed(ix)
    ix.forget(["a", "missing"])
    assert ix.nbytes == _summed(ix)
    _put(ix, "c", 7)
    view = ix.view(["c"])
    view.keep_doc("d1", {"c": 1.0, "x": 2.0})  # feedback keeps documents through a view
    view.keep_doc("d1", {"c": 1.0})
    ix.dfs["y"] = 3.0
    assert ix.nbytes == _summed(ix) and len(ix.doc_counts) == 1
    cache.touch_all([ix], ["c", "b"])
    cache.budget = 0
    cache.evict(keep=set())
    assert not ix.entries and ix.nbytes == _summed(ix) and cache.evictions == 2
    ix.moved_to(5, postings.Stats())
    assert ix.nbytes == _summed(ix)
    _put(ix, "z", 3)
    ix.keep_doc("d2", {"z": 1.0})
    ix.clear()
    assert ix.nbytes == _summed(ix) == 0
