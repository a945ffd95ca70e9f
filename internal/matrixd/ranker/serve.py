"""The learned ranker at search time: the current models every matrixd reads from vectord,
which of them may rank a caller's search, and the re-ordering itself.

Every replica reads the newest model of each (playbook, corpora) every
`ranker_refresh_seconds` (and at once after training one), so all rank alike. A model
ranks a search with feedback (`use_playbook`) of its playbook only for a caller who sees
every corpus it was trained on: a model made from records of corpora a key cannot see
never orders that key's hits. It orders the hits of its corpora among the fused
candidates: each one's initial score alpha x fused (the boost inside) plus its trees'
output; the other hits keep their fused score. A model without trees (the fallback)
leaves the boost's order as it is and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from internal.api.ranker import HitFeatures, QueryStats, RankerUse, StoredRanker
from internal.api.responses import RankedHit
from internal.common.access import Scope
from internal.common.auth import as_service
from internal.common.errors import LakehouseError, describe
from internal.matrixd.boost import Match
from internal.matrixd.deps import Deps, RankerCache
from internal.matrixd.ranker import features
from lakehouse.wire.modes import DEFAULT_FUSION, ModeSpec

log = structlog.get_logger()

EXPLAIN_TOP = 5  # contributions shown per hit with `explain`


async def refresh(deps: Deps) -> None:
    """Read the current models; load the trees of the new ones (in a thread)."""
    cache = deps.rankers
    with as_service():
        rows = await deps.vectord.current_rankers()
    boosters = {}
    for m in rows:
        if m.trees > 0 and m.model:
            boosters[m.id] = cache.boosters.get(m.id) or await asyncio.to_thread(_load, m.model)
    cache.current, cache.boosters, cache.error = rows, boosters, None
    cache.loaded.set()


async def run_forever(deps: Deps) -> None:
    """Read the models every `ranker_refresh_seconds`."""
    while True:
        try:
            await refresh(deps)
        except asyncio.CancelledError:
            raise
        except LakehouseError as exc:  # vectord away: the models read before stay
            deps.rankers.error = describe(exc)
            log.warning("ranker_refresh_failed", error=deps.rankers.error)
        await asyncio.sleep(deps.cfg.ranker_refresh_seconds)


async def ready(cache: RankerCache, wait: float = 2.0) -> None:
    """Wait (a little) for the first read of the models."""
    if not cache.loaded.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await cache.loaded.wait()


def usable(cache: RankerCache, playbook_corpus: str, scope: Scope | None) -> list[StoredRanker]:
    """The playbook's current models the caller may be ranked with, newest first: those
    whose every corpus it sees."""
    return sorted((m for m in cache.current if m.playbook_corpus == playbook_corpus
                   and (scope is None or all(scope.sees(c) for c in m.corpora))),
                  key=lambda m: -m.id)


def _load(text: str) -> Any:
    import lightgbm as lgb  # only once a model with trees exists

    return lgb.Booster(model_str=text)


@dataclass
class Plan:
    """The models that order one search's candidates (empty: the boost alone, and why)."""

    models: list[StoredRanker]
    reason: str | None = None

    @property
    def applies(self) -> bool:
        return bool(self.models)


def plan(cache: RankerCache, playbook_corpus: str, scope: Scope | None, mode: ModeSpec,
         fusion: str | None) -> Plan | None:
    """Which models order this search: None when the playbook has no model the caller may
    be ranked with (the answer then says nothing of a ranker); else those with trees, or
    why none orders it."""
    mine = usable(cache, playbook_corpus, scope)
    if not mine:  # none, or none of corpora this caller sees all of: as if none
        return None
    if not mode.ranked:
        return Plan([], f"mode {mode.name}: the model ranks a fused search's candidates")
    if fusion not in (None, DEFAULT_FUSION):
        return Plan([], f"fusion {fusion}: the model was trained on the {DEFAULT_FUSION} "
                        "fusion's scores")
    used = [m for m in mine if m.trees > 0 and m.id in cache.boosters]
    if not used:
        return Plan([], mine[0].reason or "the model has no trees")
    return Plan(used)


def tilt(key: float, weight: float) -> float:
    """A ranking key tilted by its corpus's weight as the merge tilts a score (x w), on
    either side of zero: a weight above 1 always raises it."""
    return key * weight if key >= 0 else key / weight


def rerank(cache: RankerCache, p: Plan, hits: list[RankedHit],
           extras: Sequence[HitFeatures | None], matches: Sequence[Match],
           query: QueryStats | None, explain: bool,
           weights: Mapping[str, float] | None = None) -> RankerUse:
    """Order the hits by the plan's models (in place): a covered hit's score is alpha x
    fused + its trees', tilted by its corpus's weight (resource selection's or the
    request's: the ranker's order keeps them, as the merge did), `ranker_score` on every
    hit; downgraded hits stay below the others."""
    started = time.perf_counter()
    score = np.asarray([h.score if h.score is not None else 0.0 for h in hits])
    key = score.copy()
    contributions: dict[int, dict[str, float]] = {}
    taken: set[int] = set()
    for m in p.models:  # newest first: a corpus in two models is the newer's
        group = set(m.corpora)
        idx = [i for i, h in enumerate(hits) if h.corpus in group and i not in taken]
        if not idx:
            continue
        taken.update(idx)
        own = [x for x in matches if x.entry.answer_corpus in group]
        x = features.rows(hits, extras, own, query)[idx]
        booster = cache.boosters[m.id]
        add = booster.predict(x, num_threads=1)
        key[idx] = m.alpha * score[idx] + add
        if explain:
            parts = booster.predict(x, num_threads=1, pred_contrib=True)
            names = booster.feature_name()
            for row, i in zip(parts, idx, strict=True):
                top = np.argsort(-np.abs(row[:-1]), kind="stable")[:EXPLAIN_TOP]
                shown = {"alpha x fused": round(float(m.alpha * score[i]), 6),
                         "trees' mean": round(float(row[-1]), 6)}
                shown.update({names[j]: round(float(row[j]), 6) for j in top})
                contributions[i] = shown
    if weights:
        for i in taken:
            key[i] = tilt(float(key[i]), weights.get(hits[i].corpus, 1.0))
    order = sorted(range(len(hits)), key=lambda i: (bool(hits[i].downgraded), -key[i], i))
    for i in order:
        hits[i].ranker_score = round(float(key[i]), 9)
        if i in contributions:
            hits[i].ranker_contributions = contributions[i]
    hits[:] = [hits[i] for i in order]
    newest = p.models[0]
    return RankerUse(applied=True, id=newest.id, trees=newest.trees,
                     corpora=sorted({c for m in p.models for c in m.corpora}),
                     reranked=len(taken), ms=round((time.perf_counter() - started) * 1000, 3))
