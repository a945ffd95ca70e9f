"""BM25 from the in-memory index (lexical/postings.py, lexical/memory_index.py): mode lexical's "memory"
engine, and hybrid's lexical side when that engine is chosen."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from internal.api.vectord import Corpus, Hit
from internal.vectord.lexical import memory_index, postings, postings_union, sql_index, typos
from internal.vectord.search import hits, reads, union_merge
from internal.vectord.search.lexical_options import union_languages
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome, each, keep
from internal.vectord.storage.store import Store


def in_memory(store: Store) -> bool:
    return store.cfg.lexical_engine == "memory"


def fw(p: Options) -> tuple[float, float, float]:
    w = p.field_weights
    return (w["title"], w["text"], w["tags"])


async def prepared(store: Store, p: Options, outcomes: list[Outcome]
                    ) -> tuple[dict[int, postings.CorpusIndex], sql_index.QueryStats | None,
                               dict[int, int] | None]:
    """The live corpora's indexes (by corpus id), holding the query's lexemes, the union's
    statistics (None: no corpus holds a query lexeme), and the versions the search must
    still check (`reads.read_items`; None: read current already). A corpus dropped meanwhile
    fails alone (the registry is re-read once)."""
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    corpora = [o.corpus for o in live if o.corpus is not None]
    langs, auto = union_languages(p, corpora) if corpora else ([], [])
    try:
        prep = await store.lex.prepare(store.reads, corpora, p.text, langs, auto, fw(p),
                                       trust=p.trust_cache)
    except psycopg.errors.UndefinedTable:
        if store.replicas is not None and store.replicas.on_replica():
            raise  # a standby behind the registry: the search runs on the primary
        for o in live:
            try:
                o.corpus = await store.corpus(o.name, fresh=True)
            except Exception as exc:  # kept for this corpus; the others still answer
                o.error = exc
        live = [o for o in live if o.error is None]
        corpora = [o.corpus for o in live if o.corpus is not None]
        langs, auto = union_languages(p, corpora) if corpora else ([], [])
        prep = await store.lex.prepare(store.reads, corpora, p.text, langs, auto, fw(p),
                                       trust=p.trust_cache)
    prep = await corrected(store, p, prep)
    return ({c.id: ix for c, ix in zip(corpora, prep.indexes, strict=True)}, prep.stats,
            None if prep.checked else prep.versions)


async def corrected(store: Store, p: Options, prep: memory_index.Prepared
                    ) -> memory_index.Prepared:
    """The question's terms that no searched corpus holds matched within one or two edits
    against the corpora's own terms (lexical/typos.py): each correction joins the query
    at CORRECTED_WEIGHT of its term's weight, and the answer's `did_you_mean` shows the
    question corrected. A filtered search corrects nothing: its vocabulary would be the
    corpus's, rows the filter (a tenant's) refuses included, and a suggestion would show
    their words."""
    lexemes, qtf = prep.terms
    if p.filtered or not lexemes or not prep.indexes:
        return prep
    held = set(prep.stats.lexemes) if prep.stats is not None else set()
    unknown = [t for t in lexemes if t not in held and typos.budget(t) > 0]
    if not unknown:
        return prep
    lex = store.lex
    vocabs = [await lex.vocabularies.of(store.reads, ix, lex.cache.corpora.get(ix.corpus_id))
              for ix in prep.indexes]
    fixed = typos.corrections(unknown, vocabs)
    if not fixed:
        return prep
    weight = dict(zip(lexemes, qtf, strict=True))
    for wrong, right in fixed.items():
        if right not in weight:
            weight[right] = weight[wrong] * typos.CORRECTED_WEIGHT
    terms = sorted(weight)
    counts = [weight[t] for t in terms]
    views = await lex.ensure(store.reads, [ix.corpus_id for ix in prep.indexes], terms)
    p.notes.did_you_mean = typos.suggestion(p.query_text or p.text, fixed)
    p.notes.corrected = {right: wrong for wrong, right in fixed.items() if right not in lexemes}
    return memory_index.Prepared(views, memory_index.query_stats(views, terms, counts, fw(p)),
                                 prep.checked, (terms, counts))


async def lexical_ahead(store: Store, p: Options, outcomes: list[Outcome],
                         inc: dict[str, list[str]]
                         ) -> tuple[dict[int, postings.CorpusIndex], sql_index.QueryStats | None,
                                    dict[int, int] | None, dict[int, list[tuple[str, float]]]]:
    """Hybrid's lexical side, run beside its vector statement: prepared, then one
    corpus's BM25 candidates (by position), scored in memory while PostgreSQL walks the
    graph, as `corpus_candidates` would score them (unfiltered, no `include`; several
    corpora are scored as a union once the vector side says which answered,
    `union_lexical`). The versions to check are the vector side's to read."""
    indexes, stats, expect = await prepared(store, p, outcomes)
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    ahead: dict[int, list[tuple[str, float]]] = {}
    if (stats is not None and not p.filtered and len(live) == 1 and live[0].corpus is not None
            and not inc.get(live[0].name) and (ix := indexes.get(live[0].corpus.id)) is not None):
        ahead[live[0].position] = postings.top(ix, bm25_scores(p, ix, stats), p.n)
    return indexes, stats, expect, ahead


def bm25_scores(p: Options, ix: postings.CorpusIndex, stats: sql_index.QueryStats
            ) -> postings.F64:
    return postings.scores(ix, stats.lexemes, stats.weights, stats.avgdl, p.k1, p.b, fw(p))


async def filtered_top(store: Store, p: Options, corpus: Corpus, ix: postings.CorpusIndex,
               s: postings.F64, n: int) -> list[tuple[str, float]]:
    """The corpus's n best by BM25 among the items the filter admits (none: all)."""
    if not p.filtered:
        return postings.top(ix, s, n)
    m = max(4 * n, 64)
    while True:  # best first, the filter checked in PostgreSQL a widening slice at a time
        cand = postings.top(ix, s, m)
        ok = await store.matching_ids(corpus, [i for i, _ in cand], p.where, p.params)
        kept = [(i, sc) for i, sc in cand if i in ok]
        if len(kept) >= n or len(cand) < m:
            return kept[:n]
        m *= 4


def union_lexical(store: Store, p: Options, members: Sequence[tuple[int, postings.CorpusIndex]],
                   stats: sql_index.QueryStats | None) -> dict[int, list[tuple[str, float]]]:
    """The BM25 candidates of several corpora scored as one (postings_union.union_scores): per
    position, its share of the union's top n. Empty: each corpus scores alone (one corpus,
    a hard filter checked in PostgreSQL, field weights other than 1/1/1)."""
    if stats is None or len(members) < 2 or p.filtered or fw(p) != (1.0, 1.0, 1.0):
        return {}
    idx = [ix for _, ix in members]
    s = postings_union.union_scores(idx, stats.lexemes, stats.weights, stats.avgdl, p.k1, p.b,
                              store.lex.unions)
    out: dict[int, list[tuple[str, float]]] = {pos: [] for pos, _ in members}
    for wi, item_id, score in postings_union.union_top(idx, s, p.n):
        out[members[wi][0]].append((item_id, score))
    return out


def score_of(ix: postings.CorpusIndex, s: postings.F64, item_id: str) -> float | None:
    """An item's BM25 (None: no query lexeme in it)."""
    o = ix.ord_of.get(item_id)
    if o is None or o >= s.shape[0] or s[o] <= 0:
        return None
    return postings.rounded(float(s[o]))


async def memory_lexical(store: Store, p: Options, outcomes: list[Outcome],
                          fed: Federation) -> list[Hit]:
    inc = fed.include
    indexes, stats, expect = await prepared(store, p, outcomes)
    if stats is None and not inc:
        await reads.check_versions(store, expect)
        return []

    async def run(corpus: Corpus) -> tuple[Corpus, list[tuple[str, float]], dict[str, float]]:
        ix = indexes[corpus.id]
        if stats is None:  # no query lexeme anywhere: `include` items score BM25 0
            return corpus, [], dict.fromkeys(inc.get(corpus.name, []), 0.0)
        s = bm25_scores(p, ix, stats)
        found = await filtered_top(store, p, corpus, ix, s, p.k)
        have = {i for i, _ in found}
        extra = {i: score_of(ix, s, i) or 0.0 for i in inc.get(corpus.name, [])
                 if i not in have}
        return corpus, found, extra

    ranked: list[tuple[float, str, int, bool, float]] = []
    corpora: dict[int, Corpus] = {}
    for o, (corpus, found, extra) in await each(store, outcomes, run):
        corpora[o.position] = corpus
        w = fed.weight(o)
        for i, sc in found:
            ranked.append((-union_merge.weighted_score(sc, w), i, o.position, False, sc))
        for i, sc in extra.items():
            ranked.append((-union_merge.weighted_score(sc, w), i, o.position, True, sc))
    ranked.sort(key=lambda r: r[:3])
    kept = keep(ranked, p.k, lambda r: r[3])  # r[3]: an `include` item
    wanted: dict[int, list[str]] = {}
    for r in kept:
        wanted.setdefault(r[2], []).append(r[1])
    rows = await reads.read_items(store, {pos: corpora[pos] for pos in wanted}, wanted, expect)
    out: list[Hit] = []
    rank = 0
    for neg, item_id, pos, asked, score in kept:
        row = rows.get((pos, item_id))
        if row is None:
            continue  # deleted since the index was read
        rank += 0 if asked else 1  # ranks in the union's list, as one corpus would say
        h = hits.from_lexical_row(corpora[pos], row, score, None if asked else rank)
        h.merge_score = -neg
        h.included = asked
        out.append(h)
    return out
