"""Mode hybrid: each corpus's branch candidates (vector top n, BM25 top n with the union's
statistics, the symbolic share), branch lists merged across corpora to the union's top
n, fused once (feedback's second pass when asked), then the top k read back.

`hybrid_search` is the sequence of its steps, each a function below: the first reads
(the vector statements and the lexical index, side by side when the index is in
memory), the union's BM25, each corpus's candidates, the merged lists, the fusion,
feedback's pass, the ranking with the corpus weights, the hits read back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from internal.api.vectord import Corpus, Hit
from internal.common import language
from internal.vectord.lexical import cjk, postings, sql_index, versions
from internal.vectord.search import (
    feedback,
    fusion,
    hits,
    names,
    prf,
    query_vectors,
    ranker_values,
    reads,
    weighing,
)
from internal.vectord.search.candidates import (
    corpus_candidates,
    merged_lex,
    merged_vec_spaces,
    rerun,
    settled_candidates,
)
from internal.vectord.search.lexical_memory import in_memory, lexical_ahead, union_lexical
from internal.vectord.search.modes.lexical import federated_stats
from internal.vectord.search.options import Candidates, Options
from internal.vectord.search.outcome import (
    Federation,
    Outcome,
    choose,
    each,
    keep,
    ms,
    side_by_side,
)
from internal.vectord.search.registry import searches
from internal.vectord.search.union_merge import Key, top_by_distance, top_by_score
from internal.vectord.search.vector_scan import first_vectors, vectors_of
from internal.vectord.storage.store import Store

Scored = list[tuple[Key, float]]


@searches("hybrid")
async def hybrid_search(store: Store, p: Options, outcomes: list[Outcome],
                        fed: Federation) -> list[Hit]:
    """Mode hybrid; fed.factors: (corpus, id) -> the playbook's factor, inside the fusion."""
    started = time.perf_counter()
    first = await first_reads(store, p, outcomes, fed.include)
    first.union = union_bm25(store, p, first, fed.include)
    per = await candidates(store, p, outcomes, first, fed.include)
    lists = Lists.of(per, p, fed)
    lists.weights = layer_weights(store, p, per, first)
    # A fused list is built only as far as it is read: feedback reads the first pass's
    # top `docs`, and the hits are the top k, unless an `include` item (kept wherever it
    # ranks) or a corpus weight (which reorders) reaches past them.
    final = (None if lists.included or lists.asked
             or not fed.weighs_all_one(o for o, _, _ in per) else p.k)
    stats = await question_stats(store, p, first, per)
    named = await names_of(store, p, first, per, lists, stats)
    if named:  # every candidate: a named one may rank past k
        final = None
    # Feedback's pass where it is asked, or where the first pass says it may help.
    expand = p.prf.on and (p.prf.asked or worth_expanding(p, stats, named))
    fused = lists.fuse(p, fed, p.prf.docs if expand else final)
    first_lex = lists.lex  # the question's own BM25, before feedback expands it
    if expand and fused:
        await feedback_pass(store, p, per, fed, first, lists, fused)
        fused = lists.fuse(p, fed, final)
    if named:
        fused = lifted(fused, named)
    ranked = ranking(fused, per, fed, p.k, lists)
    out = await read_hits(store, ranked, per, lists, first)
    if p.ranker is not None:
        await ranker_features(store, p, out, per, first, first_lex)
    # Each corpus's answer was ready when the union's was: its time is the search's (a
    # corpus settled from shared reads ran no statement of its own to time).
    took = ms(started)
    for o, _, _ in per:
        o.took_ms = max(o.took_ms, took)
    return out


@dataclass
class FirstReads:
    """What is read before any corpus's own statement: the live corpora, each one's query
    vector and space (by position), the vector candidates read already (a space's
    shared index, or a corpus's own graph), the in-memory lexical indexes (by corpus
    id) and the union's statistics, the versions still to check (None: read current),
    and one corpus's BM25 scored while its vector statement ran."""

    live: list[Outcome]
    choices: dict[int, query_vectors.Choice]
    shared: dict[int, Scored]
    indexes: dict[int, postings.CorpusIndex]
    stats: sql_index.QueryStats | None
    federated: bool  # BM25 with given statistics (the union's)
    text: str  # the lexical branch's text ("" when no corpus holds a query lexeme)
    expect: dict[int, int] | None = None
    verified: bool = False  # expect read current already (beside the vector statement)
    ahead: dict[int, list[tuple[str, float]]] | None = None
    union: dict[int, list[tuple[str, float]]] | None = None  # union_bm25's


async def first_reads(store: Store, p: Options, outcomes: list[Outcome],
                      inc: dict[str, list[str]]) -> FirstReads:
    """The vector statements and the lexical index: side by side on two connections when
    the index is in memory (the shorter hides behind the longer: a new query over 16
    corpora, postings read ~3 ms, shared scan ~5 ms), else the union's statistics then
    the shared scans."""
    if not (in_memory(store) and p.text.strip()):
        federated, stats = await federated_stats(store, p, outcomes)
        live, choices, shared = await vectors_of(store, p, outcomes, inc, p.n)
        text = p.text if (not federated or stats is not None) else ""
        return FirstReads(live, choices, shared, {}, stats, federated, text)
    resolved = {o.position: (o.corpus, o.error) for o in outcomes}
    # The vector side first: it runs to its statement's send, and the BM25 scoring
    # then runs while PostgreSQL answers it.
    (live, choices, shared, seen), (indexes, stats, expect, ahead) = await side_by_side(
        first_vectors(store, p, outcomes, inc), lexical_ahead(store, p, outcomes, inc))
    if expect:
        # The versions the cache was trusted at: read by the vector statements, which
        # started after the search did (the rest read now, in a shared statement).
        if versions.moved(expect, seen):
            raise reads.Stale
        await reads.check_versions(store, {cid: v for cid, v in expect.items() if cid not in seen})
    if any((o.corpus, o.error) != resolved[o.position] for o in outcomes):
        # prepared re-read a dropped or recreated corpus: scan the vectors again.
        live, choices, shared = await vectors_of(store, p, outcomes, inc, p.n)
    # The statistics are given, whatever the number of corpora.
    text = p.text if stats is not None else ""
    return FirstReads(live, choices, shared, indexes, stats, True, text, expect, True, ahead)


def union_bm25(store: Store, p: Options, first: FirstReads, inc: dict[str, list[str]]
               ) -> dict[int, list[tuple[str, float]]]:
    """The BM25 candidates of the live corpora scored as one (by position), when the
    in-memory index can (no `include`: those score in their corpus's statement); one
    corpus: what was scored while its vector statement ran."""
    union = union_lexical(store, p, [
        (o.position, first.indexes[o.corpus.id]) for o in first.live
        if o.corpus is not None and o.corpus.id in first.indexes and not inc.get(o.name)],
        first.stats) if first.text.strip() else {}
    ahead = first.ahead or {}
    if not union and len(first.live) == 1 and first.live[0].position in ahead:
        return ahead
    return union


PerCorpus = list[tuple[Outcome, Corpus, Candidates]]


async def candidates(store: Store, p: Options, outcomes: list[Outcome], first: FirstReads,
                     inc: dict[str, list[str]]) -> PerCorpus:
    """Each corpus's candidates, in the outcomes' order: settled from the shared reads
    where nothing is left to read for it (no task a corpus: over 16 corpora, tasks that
    only wrapped these lists cost about half a millisecond), else its own statement."""
    quick = {o.position: got for o in outcomes if (got := _settled(p, o, first)) is not None}
    by_name = {o.name: o for o in outcomes}

    async def run(corpus: Corpus) -> tuple[Corpus, Candidates]:
        return corpus, await _own(store, p, by_name[corpus.name], corpus, first, inc)

    ran = {o.position: got for o, got in await each(
        store, [o for o in outcomes if o.position not in quick], run)}
    per: PerCorpus = []
    for o in outcomes:
        got = quick.get(o.position) or ran.get(o.position)
        if got is not None:
            per.append((o, *got))
    return per


def _choice(p: Options, o: Outcome, corpus: Corpus, first: FirstReads) -> query_vectors.Choice:
    choice = first.choices.get(o.position) or choose(p, o, corpus)
    first.choices[o.position] = choice
    return choice


def _settled(p: Options, o: Outcome, first: FirstReads) -> tuple[Corpus, Candidates] | None:
    """A corpus's candidates when nothing is left to read for it: its vectors from the
    shared reads, its BM25 scored with the union, no preferences and no `include`
    (union_bm25 leaves those out)."""
    c, vec = o.corpus, first.shared.get(o.position)
    if c is None or vec is None or o.error is not None:
        return None
    found = settled_candidates(p, o.position, vec, (first.union or {}).get(o.position))
    if found is None:
        return None
    found.space = _choice(p, o, c, first).space
    return c, found


async def _own(store: Store, p: Options, o: Outcome, corpus: Corpus, first: FirstReads,
               inc: dict[str, list[str]]) -> Candidates:
    """A corpus's candidates from its own statement (what the shared reads left)."""
    choice = _choice(p, o, corpus, first)
    vec = first.shared.get(o.position)
    if vec is not None and not first.text.strip():
        found = Candidates(vec, [], {})
    else:
        found = await corpus_candidates(
            store, p, corpus, first.text, first.federated, first.stats, o.position,
            inc.get(corpus.name, []), query_vector=choice.vector if vec is None else None,
            ix=first.indexes.get(corpus.id), scored_lex=(first.union or {}).get(o.position))
        if vec is not None:
            found.vec = vec
    found.space = choice.space
    return found


@dataclass
class Lists:
    """The union's branch lists (the vector one per embedding space), the symbolic
    scores, the keys found by no branch on their own and those `include` asked for,
    each corpus's metric and name (by position)."""

    vec: list[Scored]
    lex: Scored
    sym: dict[Key, float] | None
    included: set[Key]
    asked: set[Key]
    metric: dict[int, str]
    name: dict[int, str]
    weights: dict[str, float] | None = None  # the layers' (layer_weights), None: the request's

    @classmethod
    def of(cls, per: PerCorpus, p: Options, fed: Federation) -> Lists:
        parts = [c for _, _, c in per]
        sym: dict[Key, float] | None = None
        if p.symbolic is not None:
            sym = {}
            for c in parts:
                sym.update(c.sym)
        return cls(merged_vec_spaces(parts, p.n), merged_lex(parts, p.n), sym,
                   {key for c in parts for key in c.included},
                   {(i, o.position) for o, _, _ in per for i in fed.include.get(o.name, [])},
                   {o.position: c.metric for o, c, _ in per},
                   {o.position: o.name for o, _, _ in per})

    def fuse(self, p: Options, fed: Federation, limit: int | None) -> list[fusion.Fused[Key]]:
        """The lists fused by the request's method (the first `limit`), the playbook's
        factors applied to the branch scores first (the true values stay shown)."""
        vec, lex = self.vec, self.lex
        if fed.factors:
            factor = self.factor(fed.factors)
            vec = [top_by_distance([(k, d * factor(k)) for k, d in v], len(v)) for v in vec]
            lex = top_by_score([(k, s / factor(k)) for k, s in lex], len(lex))
        metrics = set(self.metric.values())
        if len(metrics) == 1:  # one metric (one corpus, usually): no lookup a candidate
            (metric,) = metrics
            similarities = [[(k, hits.similarity(metric, d)) for k, d in v] for v in vec]
        else:
            similarities = [[(k, hits.similarity(self.metric[k[1]], d)) for k, d in v]
                            for v in vec]
        weights = self.weights if self.weights is not None else p.fusion_weights
        return fusion.fuse(p.method, {fusion.LEXICAL: lex}, k=p.rrf_k, weights=weights,
                           symbolic=self.sym, vector_spaces=similarities, limit=limit)

    def factor(self, factors: dict[tuple[str, str], float]) -> Callable[[Key], float]:
        return lambda k: factors.get((self.name[k[1]], k[0]), 1.0)


async def feedback_pass(store: Store, p: Options, per: PerCorpus, fed: Federation,
                        first: FirstReads, lists: Lists, fused: list[fusion.Fused[Key]]) -> None:
    """Feedback's second pass (search/feedback.py): the branches it ran again replace
    their lists."""
    corpora = {o.position: c for o, c, _ in per}
    inc_at = {o.position: fed.include.get(o.name, []) for o, _, _ in per}
    parts = {o.position: c for o, _, c in per}
    vec_parts, lex_parts = await feedback.run(
        store, p, corpora, inc_at, fused, first.text, first.stats, first.choices, parts,
        first.indexes, rerun=rerun)
    # The second pass's candidates bring their own symbolic scores and `include` extras,
    # so a candidate new in this pass is scored as in the first. (`included`, "found by
    # no branch on its own", stays the first pass's: a rerun is one branch.)
    for new in (vec_parts, lex_parts):
        if lists.sym is not None and new is not None:
            for c in new:
                lists.sym.update(c.sym)
    if vec_parts is not None:
        lists.vec = merged_vec_spaces(vec_parts, p.n)
    if lex_parts is not None:
        lists.lex = merged_lex(lex_parts, p.n)


def worth_expanding(p: Options, stats: sql_index.QueryStats | None,
                    named: dict[Key, int]) -> bool:
    """The default feedback's gate (prf.worth_expanding) on the first pass's evidence."""
    held = len(stats.lexemes) if stats is not None else 0
    return prf.worth_expanding(held, bool(named), cjk.share(p.query_text) >= 0.5)


def layer_weights(store: Store, p: Options, per: PerCorpus, first: FirstReads
                  ) -> dict[str, float] | None:
    """The layers' weights with the vector layer's scaled by what its models read of the
    corpora and the question (search/weighing.py); None: the request's own weights, or
    every corpus's model reads all of it."""
    if p.fusion_weights is not None:
        return None
    corpora = []
    for _, corpus, _ in per:
        ix = first.indexes.get(corpus.id)
        held = (ix.stats.languages if ix is not None
                else {corpus.language: 1} if corpus.language != "auto" else {})
        declared = store.model_languages.get(corpus.model or "")
        corpora.append((held, None if declared is None else frozenset(declared)))
    seen = weighing.vector_seen(corpora, p.query_text)
    # The question's language matters only where a model reads two languages or more.
    asked = (asked_language(p) if any(d is not None and len(d) > 1 for _, d in corpora)
             else None)
    lexical = weighing.lexical_seen(corpora, asked)
    if seen >= 1.0 and lexical >= 1.0:
        return None
    return weighing.weights(fusion.DEFAULT_WEIGHTS, seen, lexical=lexical)


# lingua's verdict on a question counts from this share on (its verdicts on five words
# are weaker than on a page: an English question came out Danish at 0.3).
ASKED_SHARE = 0.5


def asked_language(p: Options) -> str | None:
    """The question's language (a regconfig): the request's, else lingua's confident
    verdict; None when neither."""
    if p.language is not None:
        return p.language
    verdict = language.judge(p.query_text)
    return verdict.language if verdict.confidence >= ASKED_SHARE else None


async def question_stats(store: Store, p: Options, first: FirstReads, per: PerCorpus
                         ) -> sql_index.QueryStats | None:
    """The question's BM25 statistics over the union: the first reads' (the in-memory
    engine's, or several corpora's), else read (one corpus scored by the SQL engine, which
    computes them inside its statement)."""
    if first.stats is not None or not first.text.strip() or first.indexes or not per:
        return first.stats
    return await reads.union_stats(store, p, [c for _, c, _ in per])


async def names_of(store: Store, p: Options, first: FirstReads, per: PerCorpus, lists: Lists,
                   stats: sql_index.QueryStats | None) -> dict[Key, int]:
    """The candidates the question names by title or id stem, each one's class
    (search/names.py): titles from the in-memory lexical index, else read."""
    if not p.query_text.strip():
        return {}
    found: dict[int, list[str]] = {}
    for key in {k for v in lists.vec for k, _ in v} | {k for k, _ in lists.lex}:
        found.setdefault(key[1], []).append(key[0])
    out = {(i, pos): names.EXACT for pos, ids in found.items()
           for i in names.stem_matches(ids, p.query_text)}
    corpora = {o.position: c for o, c, _ in per if o.position in found}
    if stats is None or not lists.lex:
        return out
    lexemes = stats.lexemes
    titles: dict[Key, names.Title] = {}
    unread = {}
    for pos, c in corpora.items():
        ix = first.indexes.get(c.id)
        if ix is None:
            unread[pos] = found[pos]
            continue
        for item_id, title in names.titles_of(ix, found[pos], lexemes).items():
            titles[(item_id, pos)] = title
    wanted = set(lexemes)
    for row in await reads.read_rows(store, corpora, unread, reads.TITLE_LEXEMES) if unread else []:
        titles[row["key"]] = ({t: int(tf) for t, tf in zip(row["lexemes"], row["tfs"], strict=True)
                               if t in wanted}, int(row["title_len"] or 0))
    dfs = dict(zip(lexemes, stats.dfs, strict=True))
    for key, cls in names.classes(titles, lexemes, p.notes.corrected, float(stats.n), dfs).items():
        out[key] = max(cls, out.get(key, 0))
    return out


def lifted(fused: list[fusion.Fused[Key]], named: dict[Key, int]) -> list[fusion.Fused[Key]]:
    """The fused list with the named candidates first by class (names.ranked)."""
    by_key = {f.id: f for f in fused}
    out: list[fusion.Fused[Key]] = []
    for score, key in names.ranked([(f.score, f.id) for f in fused], named):
        f = by_key[key]
        f.score = score
        out.append(f)
    return out


Ranked = list[tuple[float, int, fusion.Fused[Key]]]


def ranking(fused: list[fusion.Fused[Key]], per: PerCorpus, fed: Federation, k: int,
            lists: Lists) -> Ranked:
    """(merge score, fused rank, candidate) of the top k retrieval found and of every
    included item wherever it ranks, by the fused score times the corpus weight."""
    if fed.weighs_all_one(o for o, _, _ in per):
        # Every corpus weighs 1: score x 1 is the score, and the fused list is sorted by
        # it already (ties in its order), the very order the sort below would give.
        order = [(f.score, i, f) for i, f in enumerate(fused)]
    else:
        by_pos = {o.position: o for o, _, _ in per}
        order = sorted(((f.score * fed.weight(by_pos[f.id[1]]), i, f)
                        for i, f in enumerate(fused)), key=lambda r: (-r[0], r[1]))
    return keep(order, k, lambda r: r[2].id in lists.included or r[2].id in lists.asked)


async def read_hits(store: Store, ranked: Ranked, per: PerCorpus, lists: Lists,
                    first: FirstReads) -> list[Hit]:
    """The ranked candidates' rows read back as hits, with each layer's true value."""
    wanted: dict[int, list[str]] = {}
    for _, _, f in ranked:
        wanted.setdefault(f.id[1], []).append(f.id[0])
    corpora = {o.position: c for o, c, _ in per}
    items = await reads.read_items(store, {pos: corpora[pos] for pos in wanted}, wanted,
                                   first.expect, verified=first.verified)
    # True values, shown on the hits (one space: the list as it is, built in C).
    distance = (dict(lists.vec[0]) if len(lists.vec) == 1
                else {k: d for vec in lists.vec for k, d in vec})
    lexical_score = dict(lists.lex)
    out: list[Hit] = []
    for merged, _, f in ranked:
        item_id, pos = f.id
        row = items.get((pos, item_id))
        if row is None:
            continue  # deleted between the statements
        scores = dict(f.scores)
        if f.id in distance:
            scores[fusion.VECTOR] = hits.similarity(corpora[pos].metric, distance[f.id])
        if f.id in lexical_score:
            scores[fusion.LEXICAL] = lexical_score[f.id]
        h = hits.hit(corpora[pos], row, distance=distance.get(f.id), score=f.score,
                     ranks=dict(f.ranks), scores=scores, matched_layers=list(f.matched_layers))
        h.merge_score = merged
        h.included = f.id in lists.included
        out.append(h)
    return out


async def ranker_features(store: Store, p: Options, out: list[Hit], per: PerCorpus,
                          first: FirstReads, first_lex: Scored) -> None:
    """The learned ranker's values on the hits (search/ranker_values.py), and the
    question's stats for the answer; first_lex: the first pass's BM25 list."""
    assert p.ranker is not None
    name = {o.position: o.name for o, _, _ in per}
    plain = {(name[pos], item_id): (score, rank)
             for rank, ((item_id, pos), score) in enumerate(first_lex, 1)}
    p.ranker.stats = await ranker_values.attach(
        store, out, {c.name: c for _, c, _ in per}, first.indexes, plain, first.stats)
