"""Facet counts (docs/API.md, "Shaping results"): per facet field, how many items of the
searched corpora pass the filter and hold one of the query's lexemes (the lexical match
set; without a query text, the items that pass the filter), summed across corpora. Exact.

Where the in-memory lexical index holds a corpus whole and the search has no filter
(nor a forced one: a scoped key's or tenant token's filter makes the request filtered),
the match set is the union of the query lexemes' postings and each field's values are
held by item ordinal (lexical/facet_values.py), read once per version of the corpus: a count is
numpy work, no statement. Otherwise one statement per corpus reads the matching rows
(statements.facet_counts), as it always did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from internal.api.vectord import Corpus
from internal.vectord.lexical import facet_values, postings
from internal.vectord.search.options import Options
from internal.vectord.shaping import highlight, ordering, statements
from internal.vectord.storage.store import Store

Facets = dict[str, dict[str, int]]
Counts = list[list[tuple[str, int]]]  # per facet, (value, count); corpus: [("", n)]
# Corpora counted each way since start (tests, the benchmark's notes).
COUNTED = {"memory": 0, "postgres": 0}


async def facets(store: Store, p: Options, names: Sequence[str],
                 fields: list[ordering.Facet], size: int) -> Facets:
    """Counts per facet over the corpora's match sets, summed across corpora."""
    got = await asyncio.gather(*(store.corpus(n) for n in names), return_exceptions=True)
    corpora = [c for c in got if isinstance(c, Corpus)]
    lexemes: list[str] | None = None
    views: dict[int, postings.CorpusIndex] = {}
    if p.text.strip():
        lexemes, views = await _current_lexemes(store, p, corpora)
        if not lexemes:  # no query word occurs: nothing matches
            return {f.name: {} for f in fields}
    rows = await asyncio.gather(*(_corpus_counts(store, p, c, fields, lexemes, views.get(c.id))
                                  for c in corpora))
    counts: list[dict[str, int]] = [{} for _ in fields]
    for corpus, per in zip(corpora, rows, strict=True):
        for i, f in enumerate(fields):
            if f.kind == "corpus":
                n = sum(c for _, c in per[i])
                if n:
                    counts[i][corpus.name] = counts[i].get(corpus.name, 0) + n
            else:
                ordering.add_counts(counts[i], per[i])
    return {f.name: ordering.top_counts(counts[i], size, by_value=f.kind == "month")
            for i, f in enumerate(fields)}


async def _current_lexemes(store: Store, p: Options, corpora: list[Corpus]
                           ) -> tuple[list[str], dict[int, postings.CorpusIndex]]:
    """The query's lexemes and the index views, at the corpora's current versions: the
    cached views when the versions (read in the statement the concurrent searches share)
    are theirs, else brought up to date by a statement of their own."""
    lexemes, views = await highlight.query_lexemes(store, p, corpora)
    if views:
        now = await store.lex.versions.current(store.reads, list(views))
        if any(ix.version != now.get(cid) for cid, ix in views.items()):
            lexemes, views = await highlight.query_lexemes(store, p, corpora,
                                                                   trust=False)
    return lexemes, views


async def _corpus_counts(store: Store, p: Options, corpus: Corpus, fields: list[ordering.Facet],
                         lexemes: list[str] | None, ix: postings.CorpusIndex | None) -> Counts:
    if ix is not None and lexemes and not p.filtered:
        got = await _from_memory(store, corpus, fields, lexemes, ix)
        if got is not None:
            COUNTED["memory"] += 1
            return got
    COUNTED["postgres"] += 1
    return await statements.facet_counts(store, corpus, fields, p.where, p.params, lexemes)


def _whole(store: Store, ix: postings.CorpusIndex) -> bool:
    """Whether the view's index holds the whole corpus, at the view's version and numbering."""
    owner = store.lex.cache.corpora.get(ix.corpus_id)
    return (owner is not None and owner.whole and owner.numbering == ix.numbering
            and owner.version == ix.version)


async def _from_memory(store: Store, corpus: Corpus, fields: list[ordering.Facet],
                       lexemes: list[str], ix: postings.CorpusIndex) -> Counts | None:
    """The counts from the index's postings and the values held (None: not held whole)."""
    if not _whole(store, ix):
        return None
    entries = [ix.entries.get(t) for t in lexemes]
    if any(e is None for e in entries):
        return None
    held = np.zeros(len(ix.ids), dtype=bool)  # the match set, by ordinal
    for e in entries:
        if e is not None:
            held[e.ords] = True
    ords = np.flatnonzero(held).astype(np.int32)
    out: Counts = []
    for f in fields:
        if f.kind == "corpus":
            out.append([("", int(ords.shape[0]))])
            continue
        values = await _values(store, corpus, f, ix)
        if values is None:
            return None
        out.append(facet_values.count(values, ords))
    return out


async def _values(store: Store, corpus: Corpus, f: ordering.Facet, ix: postings.CorpusIndex
                  ) -> facet_values.Values | None:
    """The field's values at the view's version: held, else read (one search at a time per
    field; None when the corpus moved on meanwhile: the statement counts then)."""
    field = f"{f.kind}:{f.key}"
    cache = store.facet_values
    got = cache.get(corpus.id, field, ix.version, ix.numbering)
    if got is not None:
        return got
    async with cache.lock(corpus.id, field):
        got = cache.get(corpus.id, field, ix.version, ix.numbering)
        if got is None:
            version, rows = await statements.facet_values(store, corpus, f)
            if version != ix.version or not _whole(store, ix):
                return None
            owner = store.lex.cache.corpora[ix.corpus_id]
            got = facet_values.build(version, ix.numbering, owner.ord_of, rows)
            cache.put(corpus.id, field, got)
    return got
