"""Mode hybrid: each corpus's branch candidates (vector top n, BM25 top n with the union's
statistics, the symbolic share), branch lists merged across corpora to the union's top
n, fused once (feedback's second pass when asked), then the top k read back."""

from __future__ import annotations

import time

from internal.api.vectord import Corpus, Hit
from internal.vectord.lexical import postings, versions
from internal.vectord.search import feedback, fusion, hits, ranker_values, reads, union_merge
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
from internal.vectord.search.outcome import Outcome, choose, each, keep, ms, side_by_side, weight
from internal.vectord.search.vector_scan import first_vectors, vectors_of
from internal.vectord.storage.store import Store


async def hybrid_search(store: Store, p: Options, outcomes: list[Outcome],
                        weights: dict[str, float], inc: dict[str, list[str]],
                        factors: dict[tuple[str, str], float]) -> list[Hit]:
    """Mode hybrid; factors: (corpus, id) -> the playbook's factor, inside the fusion."""
    req = p.req
    started = time.perf_counter()
    indexes: dict[int, postings.CorpusIndex] = {}
    expect: dict[int, int] | None = None
    verified = False  # expect read current already (beside the vector statement)
    ahead: dict[int, list[tuple[str, float]]] = {}
    if in_memory(store) and p.text.strip():
        # The lexical index's reads and the vector branch's statements are independent:
        # side by side on two connections, the shorter hides behind the longer (a new
        # query over 16 corpora: postings read ~3 ms, shared scan ~5 ms).
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
            await reads.check_versions(
                store, {cid: v for cid, v in expect.items() if cid not in seen})
        verified = True
        if any((o.corpus, o.error) != resolved[o.position] for o in outcomes):
            # prepared re-read a dropped or recreated corpus: scan the vectors again.
            live, choices, shared = await vectors_of(store, p, outcomes, inc, p.n)
        federated = True  # the statistics are given, whatever the number of corpora
    else:
        federated, stats = await federated_stats(store, p, outcomes)
        live, choices, shared = await vectors_of(store, p, outcomes, inc, p.n)
    text = p.text if (not federated or stats is not None) else ""

    by_name = {o.name: o for o in outcomes}

    union = union_lexical(store, p, [
        (o.position, indexes[o.corpus.id]) for o in live
        if o.corpus is not None and o.corpus.id in indexes and not inc.get(o.name)],
        stats) if text.strip() else {}
    if not union and len(live) == 1 and live[0].position in ahead:
        union = ahead  # one corpus, scored while its vector statement ran

    async def run(corpus: Corpus) -> tuple[Corpus, Candidates]:
        o = by_name[corpus.name]
        choice = choices.get(o.position) or choose(p, o, corpus)
        choices[o.position] = choice
        vec = shared.get(o.position)
        if vec is not None and not text.strip():
            found = Candidates(vec, [], {})
        else:
            found = await corpus_candidates(
                store, p, corpus, text, federated, stats, o.position, inc.get(corpus.name, []),
                query_vector=choice.vector if vec is None else None, ix=indexes.get(corpus.id),
                scored_lex=union.get(o.position))
            if vec is not None:
                found.vec = vec
        found.space = choice.space
        return corpus, found

    def settled(o: Outcome) -> tuple[Corpus, Candidates] | None:
        """A corpus's candidates when nothing is left to read for it: its vectors from
        the space's shared scan, its BM25 scored with the union, no preferences and no
        `include` (`union` leaves those out; 16 corpora: no task a corpus, see `settled_candidates`)."""
        c, vec = o.corpus, shared.get(o.position)
        if c is None or vec is None or o.error is not None:
            return None
        found = settled_candidates(p, o.position, vec, union.get(o.position))
        if found is None:
            return None
        choice = choices.get(o.position) or choose(p, o, c)
        choices[o.position] = choice
        found.space = choice.space
        return c, found

    quick = {o.position: got for o in outcomes if (got := settled(o)) is not None}
    ran = {o.position: got for o, got in await each(
        store, [o for o in outcomes if o.position not in quick], run)}
    per = [(o, quick[o.position] if o.position in quick else ran[o.position])
           for o in outcomes if o.position in quick or o.position in ran]
    metric = {o.position: c.metric for o, (c, _) in per}
    metrics = sorted(set(metric.values()))
    parts = [c for _, (_, c) in per]
    vec_lists, lex = merged_vec_spaces(parts, p.n), merged_lex(parts, p.n)
    included = {key for c in parts for key in c.included}
    asked = {union_merge.key(i, o.position) for o, _ in per for i in inc.get(o.name, [])}
    sym: dict[str, float] | None = None
    if p.symbolic is not None:
        sym = {}
        for c in parts:
            sym.update(c.sym)
    name_of = {o.position: o.name for o, _ in per}

    def fac(k: str) -> float:
        item_id, pos = union_merge.unkey(k)
        return (factors or {}).get((name_of[pos], item_id), 1.0)

    def fuse(vec_lists: list[list[tuple[str, float]]], lex: list[tuple[str, float]],
             limit: int | None) -> list[fusion.Fused]:
        if factors:  # the playbook's factor inside the fusion (true values stay shown)
            vec_lists = [union_merge.top_by_distance([(k, d * fac(k)) for k, d in vec], len(vec))
                         for vec in vec_lists]
            lex = union_merge.top_by_score([(k, s / fac(k)) for k, s in lex], len(lex))
        if len(metrics) == 1:  # one metric (one corpus, usually): no key to parse
            similarities = [[(k, hits.similarity(metrics[0], d)) for k, d in vec]
                            for vec in vec_lists]
        else:
            similarities = [[(k, hits.similarity(metric[union_merge.unkey(k)[1]], d)) for k, d in vec]
                            for vec in vec_lists]
        return fusion.fuse(p.method, {fusion.LEXICAL: lex}, k=p.rrf_k,
                           weights=p.fusion_weights, symbolic=sym, vector_spaces=similarities,
                           limit=limit)

    # A fused list is built only as far as it is read: feedback reads the first pass's
    # top `docs`, and the hits are the top k, unless an `include` item (kept wherever it
    # ranks) or a corpus weight (which reorders) reaches past them.
    final = (None if included or asked or any(weight(o, weights) != 1.0 for o, _ in per)
             else req.k)
    fused = fuse(vec_lists, lex, p.prf.docs if p.prf.on else final)
    first_lex = lex  # the question's own BM25, before feedback expands it (ranker_values)
    if p.prf.on and fused:
        corpora_at = {o.position: c for o, (c, _) in per}
        inc_at = {o.position: inc.get(o.name, []) for o, _ in per}
        first = {o.position: c for o, (_, c) in per}
        vec_parts, lex_parts = await feedback.run(store, p, corpora_at, inc_at, fused, text,
                                                  stats, choices, first, indexes, rerun=rerun)
        # The second pass's candidates bring their own symbolic scores and `include`
        # extras, so a candidate new in this pass is scored as in the first. (`included`,
        # "found by no branch on its own", stays the first pass's: a rerun is one branch.)
        for new in (vec_parts, lex_parts):
            if sym is not None and new is not None:
                for c in new:
                    sym.update(c.sym)
        if vec_parts is not None:
            vec_lists = merged_vec_spaces(vec_parts, p.n)
        if lex_parts is not None:
            lex = merged_lex(lex_parts, p.n)
        fused = fuse(vec_lists, lex, final)
    # True values, shown on the hits (one space: the list as it is, built in C).
    distance = (dict(vec_lists[0]) if len(vec_lists) == 1
                else {k: d for vec in vec_lists for k, d in vec})
    lexical_score = dict(lex)
    by_pos = {o.position: o for o, _ in per}
    if all(weight(o, weights) == 1.0 for o in by_pos.values()):
        # Every corpus weighs 1: score x 1 is the score, and the fused list is sorted by
        # it already (ties in its order), the very order the sort below would give.
        order = [(f.score, i, f) for i, f in enumerate(fused)]
    else:
        order = sorted(
            ((union_merge.weighted_score(f.score, weight(by_pos[union_merge.unkey(f.id)[1]], weights)),
              i, f) for i, f in enumerate(fused)),
            key=lambda r: (-r[0], r[1]))
    # The top k retrieval found, and every included item wherever it ranks.
    ranked = keep(order, req.k, lambda r: r[2].id in included or r[2].id in asked)
    wanted: dict[int, list[str]] = {}
    for _, _, f in ranked:
        item_id, pos = union_merge.unkey(f.id)
        wanted.setdefault(pos, []).append(item_id)
    corpora = {o.position: c for o, (c, _) in per}
    items = await reads.read_items(store, {pos: corpora[pos] for pos in wanted}, wanted,
                                          expect, verified=verified)
    out: list[Hit] = []
    for merged, _, f in ranked:
        item_id, pos = union_merge.unkey(f.id)
        row = items.get((pos, item_id))
        if row is None:
            continue  # deleted between the statements
        scores = dict(f.scores)
        if f.id in distance:
            scores[fusion.VECTOR] = hits.similarity(corpora[pos].metric, distance[f.id])
        if f.id in lexical_score:
            scores[fusion.LEXICAL] = lexical_score[f.id]
        h = hits.hit(corpora[pos], row, distance=distance.get(f.id), score=f.score,
                     ranks=dict(f.ranks), scores=scores,
                     matched_layers=list(f.matched_layers))
        h.merge_score = merged
        h.included = f.id in included
        out.append(h)
    if p.ranker is not None:
        plain = {(name_of[pos], item_id): (score, rank) for rank, (item_id, pos, score) in
                 enumerate(((*union_merge.unkey(k), s) for k, s in first_lex), 1)}
        p.ranker.stats = await ranker_values.attach(
            store, out, {c.name: c for c in corpora.values()}, indexes, plain, stats)
    # Each corpus's answer was ready when the union's was: its time is the search's (a
    # corpus settled from shared reads ran no statement of its own to time).
    took = ms(started)
    for o, _ in per:
        o.took_ms = max(o.took_ms, took)
    return out
