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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import msgspec

from internal.api.vectord import (
    MAX_K,
    Corpus,
    Highlight,
    Hit,
    Recency,
    SearchSpec,
)
from internal.vectord.search import engine
from internal.vectord.search.options import Options
from internal.vectord.shaping import facet_counts, highlight, ordering, statements
from internal.vectord.storage.store import Store

DEPTH = 10  # a reordering search ranks this many times k candidates (at most MAX_K)


@dataclass(frozen=True)
class Plan:
    """The shaping options of a request, checked."""

    highlight: Highlight | None = None
    group_field: str | None = None
    group_by_parent: bool = False  # one group a corpus and parent (group_by "parent")
    group_size: int = 1
    facets: tuple[ordering.Facet, ...] = ()
    facet_size: int = 20
    diversity: float | None = None
    recency: Recency | None = None

    @property
    def reorders(self) -> bool:
        return self.group_field is not None or bool(self.diversity) or self.recency is not None

    @property
    def asks(self) -> bool:
        """Whether any shaping is asked (else: engine.search as it is, the same bytes)."""
        return self.highlight is not None or self.reorders or bool(self.facets)


NONE = Plan()


def check(req: SearchSpec) -> Plan:
    """The options checked (400 naming the field) before any corpus is touched."""
    if not (req.highlight or req.group_by is not None or req.facets is not None
            or req.diversity is not None or req.recency is not None):
        return NONE
    hl = Highlight() if req.highlight is True else (
        req.highlight if isinstance(req.highlight, Highlight) else None)
    return Plan(
        highlight=hl,
        group_field=ordering.group_field(req.group_by) if req.group_by is not None else None,
        group_by_parent=req.group_by == "parent", group_size=req.group_size,
        facets=tuple(ordering.facet(s if isinstance(s, str) else (s.field, s.interval), i)
                     for i, s in enumerate(req.facets or [])),
        facet_size=req.facet_size, diversity=req.diversity, recency=req.recency)


@dataclass
class Shaped:
    result: engine.Result
    facets: facet_counts.Facets | msgspec.UnsetType = msgspec.UNSET


async def search(store: Store, names: Sequence[str], p: Options, plan: Plan = NONE,
                 fed: engine.Federation | None = None) -> Shaped:
    """engine.search with the request's shaping applied (none asked: engine.search)."""
    if not plan.asks:
        return Shaped(await engine.search(store, names, p, fed))
    deep = p
    if plan.reorders:
        # Deeper: k and the fusion's candidates both n (n >= the candidates asked).
        n = min(MAX_K, max(p.n, DEPTH * p.k))
        deep = replace(p, k=n, n=n)
    if plan.facets:
        found, facets = await asyncio.gather(
            engine.search(store, names, deep, fed),
            facet_counts.facets(store, deep, names, list(plan.facets), plan.facet_size))
    else:
        found, facets = await engine.search(store, names, deep, fed), None
    corpora = {o.name: o.corpus for o in found.outcomes if o.corpus is not None}
    hits = found.hits
    if plan.reorders:
        hits = await _reorder(store, p, plan, corpora, hits)
        for o in found.outcomes:  # each corpus's share of the hits shown
            o.hits = sum(1 for h in hits if h.corpus == o.name)
    if plan.highlight is not None:
        await highlight.highlight(store, deep, plan.highlight, corpora, hits)
    found.hits = hits
    return Shaped(found, msgspec.UNSET if facets is None else facets)


# ---- reordering ---------------------------------------------------------------------------

def _key(h: Hit, by_distance: bool) -> float:
    """The hit's ranking key: merge_distance (ranked by distance, lower first), else
    merge_score."""
    if by_distance:
        d = h.merge_distance if h.merge_distance is not None else h.distance
        return d if d is not None else float("inf")
    s = h.merge_score if h.merge_score is not None else h.score
    return s if s is not None else float("-inf")


async def _reorder(store: Store, p: Options, plan: Plan, corpora: dict[str, Corpus],
                   hits: list[Hit]) -> list[Hit]:
    by_distance = p.mode.by_distance
    included = [h for h in hits if h.included]
    ranked = [h for h in hits if not h.included]
    if plan.recency is not None:
        ranked = _recency(plan.recency, p.mode.merge == "newest", ranked, by_distance)
    if plan.group_field is not None:
        ranked = _grouped(ranked, plan.group_field, plan.group_by_parent, plan.group_size)
    if plan.diversity:
        ranked = await _diverse(store, corpora, ranked, plan.diversity, p.k, by_distance)
    return ranked[:p.k] + included


def _recency(r: Recency, newest: bool, hits: list[Hit], by_distance: bool) -> list[Hit]:
    """Each hit's ranking key times its recency factor (by distance: divided); a mode
    merged newest first keeps its order and shows the factors."""
    now = datetime.now(UTC)
    field = ordering.metadata_key(r.field)
    for h in hits:
        when: Any = h.updated_at if field is None else h.metadata.get(field)
        f = ordering.recency_factor(ordering.age_days(when, now), r.half_life_days, r.weight)
        h.recency_factor = round(f, 6)
        if by_distance:
            h.merge_distance = _key(h, True) / f
        elif not newest:
            h.merge_score = _key(h, False) * f
    if newest:
        return hits
    return ordering.rerank(hits, [_key(h, by_distance) for h in hits], descending=not by_distance)


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
                   diversity: float, k: int, by_distance: bool) -> list[Hit]:
    """The k hits maximal marginal relevance picks, by the corpora's stored vectors."""
    wanted: dict[str, list[str]] = {}
    for h in hits:
        if h.corpus in corpora:
            wanted.setdefault(h.corpus, []).append(h.id)
    read = await asyncio.gather(*(statements.vectors(store, corpora[name], ids)
                                  for name, ids in wanted.items()))
    vecs = dict(zip(wanted, read, strict=True))
    relevance = [-_key(h, True) if by_distance else _key(h, False) for h in hits]
    picked = ordering.mmr(
        relevance,
        [vecs.get(h.corpus, {}).get(h.id) for h in hits],
        [(corpora[h.corpus].model, corpora[h.corpus].dim) if h.corpus in corpora else h.corpus
         for h in hits], diversity, k)
    return [hits[i] for i in picked]
