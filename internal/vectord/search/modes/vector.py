"""Mode vector: each corpus's top k by distance, merged by distance (spaces interleaved
by rank when several models answer)."""

from __future__ import annotations

import time

from internal.api import validate
from internal.api.vectord import Corpus, Hit
from internal.vectord.search import hits, reads, union_merge
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Outcome, choose, each, keep_hits, ms, weight
from internal.vectord.search.vector_scan import shared_hits, vectors_of
from internal.vectord.storage.store import Store


async def vector_search(store: Store, p: Options, outcomes: list[Outcome],
                        weights: dict[str, float], inc: dict[str, list[str]],
                        factors: dict[tuple[str, str], float]) -> list[Hit]:
    """Mode vector (the factors are hybrid's: unused here)."""
    req = p.req
    started = time.perf_counter()
    by_name = {o.name: o for o in outcomes}
    space: dict[str, int] = {}
    live, by_pos, shared = await vectors_of(store, p, outcomes, inc, req.k)
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
        q = validate.vector(choice.vector, corpus.dim, corpus.metric, "query_vector")
        rows = await store.vector_search(corpus, q, req.k, p.ef_search, p.where, p.params)
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

    per_space: dict[int, list[tuple[float, str, int, Hit]]] = {}
    for o, found in await each(store, outcomes, run):
        w = weight(o, weights)
        for h in found:
            assert h.distance is not None
            h.merge_distance = union_merge.weighted_distance(h.distance, w)
            per_space.setdefault(space[o.name], []).append(
                (h.merge_distance, h.id, o.position, h))
    for rows in per_space.values():
        rows.sort(key=lambda r: r[:3])
    if len(per_space) <= 1:
        return keep_hits([r[3] for rows in per_space.values() for r in rows], req.k, inc)
    # Several models: distances of different spaces do not compare; the spaces' lists
    # are interleaved by rank (each space's first, then each one's second...).
    ranked = sorted(((rank, r[2], r[1], r[3])
                     for rows in per_space.values() for rank, r in enumerate(rows)),
                    key=lambda r: r[:3])
    return keep_hits([r[3] for r in ranked], req.k, inc)
