"""Mode vector: each corpus's top k by distance, merged by distance (spaces interleaved
by rank when several models answer)."""

from __future__ import annotations

import time

from internal.api import validate
from internal.api.vectord import Corpus, Hit
from internal.vectord.search import hits, reads, union_merge
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome, choose, each, keep_hits, ms
from internal.vectord.search.registry import searches
from internal.vectord.search.vector_scan import shared_hits, vectors_of
from internal.vectord.storage.store import Store


@searches("vector")
async def vector_search(store: Store, p: Options, outcomes: list[Outcome],
                        fed: Federation) -> list[Hit]:
    """Mode vector (the playbook's factors are hybrid's: unused here)."""
    started = time.perf_counter()
    by_name = {o.name: o for o in outcomes}
    space: dict[str, int] = {}
    inc = fed.include
    live, by_pos, shared = await vectors_of(store, p, outcomes, inc, p.k)
    choices = {o.name: by_pos[o.position] for o in live}
    grouped = await shared_hits(store, {o.position: o.corpus for o in live
                                         if o.corpus is not None and o.position in shared}, shared)
    shared_ms = ms(started)  # the time of a corpus its space's shared scan served

    async def run(corpus: Corpus) -> list[Hit]:
        o = by_name[corpus.name]
        choice = choices.get(corpus.name) or choose(p, o, corpus)
        if choice.vector is None:
            return []
        space[corpus.name] = choice.space
        if o.position in grouped:
            o.took_ms += shared_ms
            return grouped[o.position]
        q = validate.vector(choice.vector, corpus.dim, corpus.metric, "query_vector",
                            corpus.precision)
        rows = await store.vector_search(corpus, q, p.k, p.ef_search, p.where, p.params)
        found = hits.from_vector_rows(corpus, rows)
        have = {h.id for h in found}
        extra = [i for i in inc.get(corpus.name, []) if i not in have]
        if extra:
            for row in await reads.included(store, p, corpus, extra, q, "", False, None):
                d = float(row["distance"])
                h = hits.hit(corpus, row, distance=d,
                             scores={"vector": hits.similarity(corpus.metric, d)})
                h.included = True
                found.append(h)
        return found

    per_space: dict[int, list[tuple[int, float, list[Hit]]]] = {}
    for o, found in await each(store, outcomes, run):
        if found:  # (a corpus no query vector fits has no space and no hits)
            per_space.setdefault(space[o.name], []).append((o.position, fed.weight(o), found))
    lists = [union_merge.merged_hits(part, "distance") for part in per_space.values()]
    if len(lists) <= 1:
        return keep_hits(lists[0] if lists else [], p.k, inc)
    # Several models: distances of different spaces do not compare; the spaces' lists
    # are interleaved by rank (each space's first, then each one's second...).
    position = {o.name: o.position for o in outcomes}
    ranked = sorted(((rank, position[h.corpus], h.id, h)
                     for part in lists for rank, h in enumerate(part)), key=lambda r: r[:3])
    return keep_hits([r[3] for r in ranked], p.k, inc)
