"""Pseudo-relevance feedback's pass (the math in search/prf.py): the branches run again from
the query moved toward the first pass's top fused hits, the vector query of each
embedding space by Rocchio and the lexical query expanded by RM3 with the union's
statistics. The branches themselves are search/candidates.py's (`rerun`), the statements
reads.py's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np

from internal.api.vectord import Corpus
from internal.vectord.lexical import memory_index, postings, sql_index
from internal.vectord.search import fusion, prf, query_vectors, reads
from internal.vectord.search.options import Candidates, Options
from internal.vectord.search.union_merge import Key
from internal.vectord.storage.store import Store

# The branch again over the given corpora (candidates.rerun): corpora, include, text, given
# statistics?, statistics, moved query vector, in-memory indexes, its space.
Rerun = Callable[..., Awaitable[list["Candidates"]]]


async def run(store: Store, p: Options, corpora: dict[int, Corpus],
              inc: dict[int, list[str]], first: list[fusion.Fused[Key]], text: str,
              stats: sql_index.QueryStats | None,
              choices: dict[int, query_vectors.Choice], first_parts: dict[int, Candidates],
              indexes: dict[int, postings.CorpusIndex] | None = None, *,
              rerun: Rerun) -> tuple[list[Candidates] | None, list[Candidates] | None]:
    """The branches run again from the query moved toward the top fused hits (search/prf.py):
    each corpus's candidates of the moved vector branch and of the expanded lexical branch
    (None: that branch does not run again). Each embedding space moves its own query
    vector toward the top hits of its own corpora (first_parts: a space with none keeps
    its first pass)."""
    if p.prf.min_docs > 0:
        if stats is None and text.strip():
            stats = await reads.union_stats(store, p, list(corpora.values()))
        if stats is None or stats.n < p.prf.min_docs:
            return None, None
    top = first[:p.prf.docs]
    wanted: dict[int, list[str]] = {}
    for f in top:
        item_id, pos = f.id
        wanted.setdefault(pos, []).append(item_id)
    new_vec: list[Candidates] | None = None
    new_lex: list[Candidates] | None = None
    searched = {pos: c for pos, c in choices.items() if c.vector is not None and pos in corpora}
    if p.prf.vector and searched:
        docs = await reads.read_rows(store, corpora, wanted, reads.FEEDBACK_VECTORS)
        by_key = {r["key"]: np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in docs}
        by_space: dict[int, list[int]] = {}
        for pos, c in searched.items():
            by_space.setdefault(c.space, []).append(pos)
        new_vec = []
        for space, positions in sorted(by_space.items()):
            # In the fused order, so the sum (and the moved query) does not depend on which
            # corpus answered first.
            vectors = [by_key[f.id] for f in top
                       if f.id in by_key and f.id[1] in positions]
            if not vectors and len(by_space) > 1:
                new_vec += [first_parts[pos] for pos in positions]
                continue
            q = np.asarray(searched[positions[0]].vector, dtype=np.float32)
            moved = prf.rocchio(q, vectors, p.prf.weight)
            new_vec += await rerun(store, p, {pos: corpora[pos] for pos in positions}, inc,
                                    "", False, None, moved.tolist(), space=space)
    if p.prf.terms > 0 and text.strip():
        expanded = await expanded_stats(store, p, corpora, top, wanted, stats, indexes)
        if expanded is not None:
            if indexes:  # the expanded query's lexemes, loaded where not cached
                ids = list(indexes)
                views = await store.lex.ensure(store.reads, ids, expanded.lexemes)
                indexes = dict(zip(ids, views, strict=True))
            new_lex = await rerun(store, p, corpora, inc, text, True, expanded, None,
                                   indexes)
    return new_vec, new_lex


async def _docs(store: Store, corpora: dict[int, Corpus], wanted: dict[int, list[str]],
                         indexes: dict[int, postings.CorpusIndex] | None
                         ) -> dict[Key, dict[str, float]]:
    """Each feedback document's lexeme counts (by fused key): from the in-memory index
    when it read them at its version before, else from PostgreSQL (and kept there)."""
    docs: dict[Key, dict[str, float]] = {}
    missing: dict[int, list[str]] = {}
    for pos, ids in wanted.items():
        ix = (indexes or {}).get(corpora[pos].id)
        for item_id in ids:
            counts = ix.doc_counts.get(item_id) if ix is not None else None
            if counts is None:
                missing.setdefault(pos, []).append(item_id)
            else:
                docs[(item_id, pos)] = counts
    for row in await reads.read_rows(store, corpora, missing, reads.FEEDBACK_LEXEMES) if missing else []:
        counts = memory_index.tsvector_counts(row["lex"])
        docs[row["key"]] = counts
        ix = (indexes or {}).get(corpora[row["key"][1]].id)
        if ix is not None:
            ix.keep_doc(row["id"], counts)
    return docs


async def expanded_stats(store: Store, p: Options, corpora: dict[int, Corpus],
                          top: list[fusion.Fused[Key]], wanted: dict[int, list[str]],
                          stats: sql_index.QueryStats | None,
                          indexes: dict[int, postings.CorpusIndex] | None = None
                          ) -> sql_index.QueryStats | None:
    """RM3: the query's lexemes and the feedback's best, with the union's statistics."""
    if stats is None:
        stats = await reads.union_stats(store, p, list(corpora.values()))
    if stats is None:
        return None
    query_tf = {t: w / prf.idf(df, stats.n)
                for t, w, df in zip(stats.lexemes, stats.weights, stats.dfs, strict=True)
                if prf.idf(df, stats.n) > 0}
    docs = await _docs(store, corpora, wanted, indexes)
    model = prf.relevance_model(docs, {f.id: f.score for f in top})

    async def dfs(lexemes: list[str]) -> dict[str, float]:
        """The union's document frequency of each lexeme held (summed over the corpora):
        from the in-memory indexes where they know them, the rest read in one statement
        for every corpus (and kept there)."""
        known: dict[int, dict[str, float]] = {}
        ask: dict[int, list[str]] = {}
        for c in corpora.values():
            ix = (indexes or {}).get(c.id)
            known[c.id] = {t: d for t in lexemes if ix is not None and (d := ix.df(t)) is not None}
            missing = [t for t in lexemes if t not in known[c.id]]
            if missing:
                ask[c.id] = missing
        for cid, read in (await reads.read_dfs(store, ask)).items() if ask else ():
            ix = (indexes or {}).get(cid)
            if ix is not None:
                ix.dfs.update(read)
            known[cid].update(read)
        out: dict[str, float] = {}
        for part in known.values():
            for t, d in part.items():
                if d > 0:
                    out[t] = out.get(t, 0.0) + d
        return out

    # Document frequencies are read for the relevance model's best lexemes first, a
    # widening slice at a time, until `terms` of them pass without_common: the expansion
    # is the same as with every lexeme's df (expand takes the best survivors in this
    # order), and a search reads tens of dfs instead of a thousand (7 ms of 25).
    # Best first, ties by lexeme: as far as the slice read needs (prf.best_first).
    order: list[str] = []
    df: dict[str, float] = {}
    # Several corpora at versions the in-memory indexes hold: their sums are remembered.
    views = [(indexes or {}).get(c.id) for c in corpora.values()]
    summed = None if len(views) < 2 or any(v is None for v in views) else store.lex.unions.dfs(
        tuple((v.corpus_id, v.version) for v in views if v is not None))
    want, done, step = sorted(query_tf), 0, max(4 * p.prf.terms, 32)
    while True:
        if len(order) < min(done + step, len(model)):
            order = prf.best_first(model, done + step)
        batch = sorted(set(want + order[done:done + step]) - set(df))
        if summed is not None:
            df.update((t, summed[t]) for t in batch if summed.get(t, 0.0) > 0)
            batch = [t for t in batch if t not in summed]
        got = await dfs(batch) if batch else {}
        df.update(got)
        if summed is not None:
            summed.update((t, got.get(t, 0.0)) for t in batch)
        done += step
        kept = prf.without_common({t: model[t] for t in order[:done]}, df, stats.n, query_tf)
        if len(kept) >= p.prf.terms or done >= len(model):
            break
        want, step = [], step * 2
    model = kept
    mixed = prf.expand(query_tf, model, p.prf.terms, p.prf.weight)
    lexemes = sorted(mixed)
    scale = sum(query_tf.values()) or 1.0  # keeps the original lexemes' weights near idf·qtf
    rows = sorted(((df[t], t, prf.idf(df[t], stats.n) * mixed[t] * scale)
                   for t in lexemes if df.get(t, 0) > 0), key=lambda r: (r[0], r[1]))
    if not rows:
        return None
    return sql_index.QueryStats(lexemes=[t for _, t, _ in rows], weights=[w for _, _, w in rows],
                              dfs=[d for d, _, _ in rows], avgdl=stats.avgdl, n=stats.n)
