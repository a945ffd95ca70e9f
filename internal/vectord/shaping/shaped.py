"""Results shaped as a search engine's: highlights, one hit per group, facets, diversity
and recency (docs/API.md, "Shaping results"). Every option is off by default, and a
request that asks for none runs engine.search exactly as before (the same bytes).

The plan: the options are checked before any corpus is touched; a request that reorders
(recency, group_by, diversity) searches deeper (DEPTH x k candidates, at least the
fusion's candidates), then the ranked list is reordered in the order recency, groups,
diversity and cut to k; highlights are made for the k shown; facets are counted
alongside the search, over the lexical match set and the filter. The policy is
shaping/ordering.py and shaping/fragments.py (no I/O), the statements statements.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from internal.api.vectord import (
    MAX_K,
    Corpus,
    Highlight,
    Hit,
    SearchRequest,
)
from internal.vectord.search import engine, validation
from internal.vectord.search.options import Options
from internal.vectord.shaping import facet_counts, highlight, ordering, statements
from internal.vectord.storage.store import Store

DEPTH = 10  # a reordering search ranks this many times k candidates (at most MAX_K)


@dataclass(frozen=True)
class Plan:
    """The shaping options of a request, checked."""

    highlight: Highlight | None
    group_field: str | None
    facets: list[ordering.Facet]
    reorders: bool


def asks(req: SearchRequest) -> bool:
    """Whether the request asks for any shaping (else: engine.search as it is)."""
    return bool(req.highlight) or req.group_by is not None or req.facets is not None or (
        req.diversity is not None or req.recency is not None)


def check(req: SearchRequest) -> Plan:
    """The options checked (400 naming the field) before any corpus is touched."""
    hl = Highlight() if req.highlight is True else (
        req.highlight if isinstance(req.highlight, Highlight) else None)
    group_field = ordering.group_field(req.group_by) if req.group_by is not None else None
    facets = [ordering.facet(s if isinstance(s, str) else (s.field, s.interval), i)
              for i, s in enumerate(req.facets or [])]
    reorders = group_field is not None or bool(req.diversity) or req.recency is not None
    return Plan(hl, group_field, facets, reorders)


@dataclass
class Shaped:
    result: engine.Result
    facets: facet_counts.Facets | msgspec.UnsetType = msgspec.UNSET


async def search(store: Store, names: Sequence[str], req: SearchRequest,
                 corpus_weights: dict[str, float] | None = None,
                 p: Options | None = None,
                 include: Sequence[tuple[str, str, float]] = ()) -> Shaped:
    """engine.search with the request's shaping applied (none asked: engine.search)."""
    if not asks(req):
        return Shaped(await engine.search(store, names, req, corpus_weights, p, include))
    plan = check(req)
    p = p or validation.check(store, req)
    deep = req
    if plan.reorders:
        n = min(MAX_K, max(p.n, DEPTH * req.k))
        deep = msgspec.structs.replace(req, k=n, candidates=max(n, req.candidates or 0))
        p = validation.check(store, deep)
    if plan.facets:
        found, facets = await asyncio.gather(
            engine.search(store, names, deep, corpus_weights, p, include),
            facet_counts.facets(store, p, names, plan.facets, req.facet_size))
    else:
        found, facets = await engine.search(store, names, deep, corpus_weights, p, include), None
    corpora = {o.name: o.corpus for o in found.outcomes if o.corpus is not None}
    hits = found.hits
    if plan.reorders:
        hits = await _reorder(store, req, plan, corpora, hits)
        for o in found.outcomes:  # each corpus's share of the hits shown
            o.hits = sum(1 for h in hits if h.corpus == o.name)
    if plan.highlight is not None:
        await highlight.highlight(store, p, req.query_text, plan.highlight, corpora, hits)
    found.hits = hits
    return Shaped(found, msgspec.UNSET if facets is None else facets)


# ---- reordering ---------------------------------------------------------------------------

def _key(h: Hit, vector: bool) -> float:
    """The hit's ranking key: merge_distance (vector mode, lower first), else merge_score."""
    if vector:
        d = h.merge_distance if h.merge_distance is not None else h.distance
        return d if d is not None else float("inf")
    s = h.merge_score if h.merge_score is not None else h.score
    return s if s is not None else float("-inf")


async def _reorder(store: Store, req: SearchRequest, plan: Plan, corpora: dict[str, Corpus],
                   hits: list[Hit]) -> list[Hit]:
    vector = req.mode == "vector"
    included = [h for h in hits if h.included]
    ranked = [h for h in hits if not h.included]
    if req.recency is not None:
        ranked = _recency(req, ranked, vector)
    if plan.group_field is not None:
        ranked = _grouped(ranked, plan.group_field, req.group_by == "parent", req.group_size)
    if req.diversity:
        ranked = await _diverse(store, corpora, ranked, req.diversity, req.k, vector)
    return ranked[:req.k] + included


def _recency(req: SearchRequest, hits: list[Hit], vector: bool) -> list[Hit]:
    """Each hit's ranking key times its recency factor (vector: divided); keyword mode
    keeps its newest-first order and shows the factors."""
    assert req.recency is not None
    r = req.recency
    now = datetime.now(UTC)
    field = ordering.metadata_key(r.field)
    for h in hits:
        when: Any = h.updated_at if field is None else h.metadata.get(field)
        f = ordering.recency_factor(ordering.age_days(when, now), r.half_life_days, r.weight)
        h.recency_factor = round(f, 6)
        if vector:
            h.merge_distance = _key(h, True) / f
        elif req.mode != "keyword":
            h.merge_score = _key(h, False) * f
    if req.mode == "keyword":
        return hits
    return ordering.rerank(hits, [_key(h, vector) for h in hits], descending=not vector)


def _grouped(hits: list[Hit], key: str, per_corpus: bool, size: int) -> list[Hit]:
    """The best hit of each group, its next best under `group` (every group kept)."""
    keys: list[Hashable | None] = []
    for h in hits:
        value = ordering.group_key(h.metadata, key)
        keys.append(None if value is None else ((h.corpus, value) if per_corpus else value))
    out = []
    for g in ordering.group(keys, size, len(hits)):
        leader = hits[g.leader]
        value = ordering.group_key(leader.metadata, key)
        leader.group = {"key": value, "hits": [hits[i] for i in g.members], "count": g.count}
        out.append(leader)
    return out


async def _diverse(store: Store, corpora: dict[str, Corpus], hits: list[Hit],
                   diversity: float, k: int, vector: bool) -> list[Hit]:
    """The k hits maximal marginal relevance picks, by the corpora's stored vectors."""
    wanted: dict[str, list[str]] = {}
    for h in hits:
        if h.corpus in corpora:
            wanted.setdefault(h.corpus, []).append(h.id)
    read = await asyncio.gather(*(statements.vectors(store, corpora[name], ids)
                                  for name, ids in wanted.items()))
    vecs = dict(zip(wanted, read, strict=True))
    relevance = [-_key(h, True) if vector else _key(h, False) for h in hits]
    picked = ordering.mmr(
        relevance,
        [vecs.get(h.corpus, {}).get(h.id) for h in hits],
        [(corpora[h.corpus].model, corpora[h.corpus].dim) if h.corpus in corpora else h.corpus
         for h in hits], diversity, k)
    return [hits[i] for i in picked]
