"""The learned ranker's values of a hybrid search (a multi-search's `features: true`): per
hit, the BM25 of the question's own lexemes and its rank (the first pass: with
pseudo-relevance feedback the hit's `scores.lexical` is the expanded query's), the words
of its title and text, and the idf-weighted share of the question's lexemes in its title
and in its text; per question, its lexemes' idf (the union's statistics).

The shares come from the postings: the in-memory index's entries of the query's lexemes
when that engine scored the search (no statement), else one statement a corpus over its
postings table (lexical.sql_index). matrixd asks for them only when a model ranks the
search, so a search that does not ask answers as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from psycopg import sql

from internal.api.ranker import HitFeatures, QueryStats
from internal.api.vectord import Corpus, Hit
from internal.vectord.lexical import postings, sql_index
from internal.vectord.search import prf
from internal.vectord.storage.store import Store

MATCHES = """
SELECT item_id, lexeme, tf_a > 0, tf_b > 0 FROM {postings}
WHERE lexeme = ANY(%(lexemes)s) AND item_id = ANY(%(ids)s)
"""


def query_stats(stats: sql_index.QueryStats | None) -> tuple[QueryStats, dict[str, float]]:
    """The question's lexemes' idf (mean, largest) and each lexeme's."""
    if stats is None or not stats.lexemes:
        return QueryStats(lexemes=0), {}
    idf = {t: prf.idf(df, stats.n) for t, df in zip(stats.lexemes, stats.dfs, strict=True)}
    values = list(idf.values())
    return QueryStats(lexemes=len(values), idf_mean=sum(values) / len(values),
                      idf_max=max(values)), idf


def _from_index(ix: postings.CorpusIndex, ids: Sequence[str], idf: Mapping[str, float]
                ) -> dict[str, tuple[float, float]]:
    """id -> (idf in the title, idf in the text) of the query lexemes, from the index."""
    where = {i: n for n, i in enumerate(ids)}
    ords = np.asarray([ix.ord_of.get(i, -1) for i in ids], dtype=np.int64)
    known = ords >= 0
    slot = np.full(len(ix.ids), -1, dtype=np.int64)
    slot[ords[known]] = np.flatnonzero(known)
    title = np.zeros(len(ids))
    text = np.zeros(len(ids))
    for t, w in idf.items():
        e = ix.entries.get(t)
        if e is None or e.df == 0:
            continue
        at = slot[e.ords]
        hit = at >= 0
        title[at[hit & (e.tf[:, 0] > 0)]] += w
        text[at[hit & (e.tf[:, 1] > 0)]] += w
    return {i: (float(title[n]), float(text[n])) for i, n in where.items()}


async def _from_postings(store: Store, corpus: Corpus, ids: Sequence[str],
                         idf: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """The same, from the corpus's postings table (the SQL engine)."""
    out = {i: (0.0, 0.0) for i in ids}
    stmt = sql.SQL(MATCHES).format(postings=sql_index.postings_table(corpus.id))
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {"lexemes": list(idf), "ids": list(ids)})
        for item_id, lexeme, in_title, in_text in await cur.fetchall():
            a, b = out[item_id]
            w = idf.get(lexeme, 0.0)
            out[item_id] = (a + w * bool(in_title), b + w * bool(in_text))
    return out


async def attach(store: Store, hits: Sequence[Hit], corpora: Mapping[str, Corpus],
                 indexes: Mapping[int, postings.CorpusIndex],
                 first: Mapping[tuple[str, str], tuple[float, int]],
                 stats: sql_index.QueryStats | None) -> QueryStats:
    """Set each hit's `features`; the question's stats. first: (corpus, id) -> the first
    pass's BM25 and rank."""
    qs, idf = query_stats(stats)
    total = sum(idf.values())
    shares: dict[tuple[str, str], tuple[float, float]] = {}
    by_corpus: dict[str, list[str]] = {}
    for h in hits:
        by_corpus.setdefault(h.corpus, []).append(h.id)
    if total > 0:
        for name, ids in by_corpus.items():
            c = corpora[name]
            ix = indexes.get(c.id)
            got = (_from_index(ix, ids, idf) if ix is not None
                   else await _from_postings(store, c, ids, idf))
            shares.update({(name, i): v for i, v in got.items()})
    for h in hits:
        a, b = shares.get((h.corpus, h.id), (0.0, 0.0))
        bm25, rank = first.get((h.corpus, h.id), (None, None))
        h.features = HitFeatures(
            title_words=len(h.title.split()) if h.title else 0, text_words=len(h.text.split()),
            title_match=a / total if total > 0 else None,
            text_match=b / total if total > 0 else None, bm25=bm25, bm25_rank=rank)
    return qs
