"""The learned ranker's wire types between matrixd and vectord (vectord keeps the models in
PostgreSQL: /internal/rankers, the stack's own routes), and the public ones re-exported."""

from __future__ import annotations

from datetime import datetime

import msgspec

from lakehouse.wire.features import HitFeatures as HitFeatures
from lakehouse.wire.features import QueryStats as QueryStats
from lakehouse.wire.ranker import RankerFailure as RankerFailure
from lakehouse.wire.ranker import RankerModel as RankerModel
from lakehouse.wire.ranker import RankerStatus as RankerStatus
from lakehouse.wire.ranker import RankerTraining as RankerTraining
from lakehouse.wire.ranker import RankerUse as RankerUse
from lakehouse.wire.ranker import TrainRanker as TrainRanker

# Versions kept per (playbook, corpora): older ones are deleted when a new one is stored.
KEEP_VERSIONS = 20


class NewRanker(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A trained model as matrixd stores it (POST /internal/rankers). `model`: LightGBM's
    text of the trees (None with 0 trees: the fallback); `playbook_count`: the
    playbook's entries when it trained (the ticker trains again when it moved enough)."""

    playbook_corpus: str
    corpora: list[str]
    trained_by: str
    records: int
    playbook_count: int
    queries: int
    examples: int
    seconds: float
    trees: int
    alpha: float
    reason: str | None = None
    ndcg10_boost: float | None = None
    ndcg10_ranker: float | None = None
    cv: dict[str, float] = {}
    features: list[str] = []
    model: str | None = None


class StoredRanker(NewRanker, kw_only=True):
    """A stored model: its version id and when it was stored; `model` only when asked."""

    id: int
    created_at: datetime

    def public(self, current: bool) -> RankerModel:
        """The model as GET /v1/matrix/ranker lists it."""
        return RankerModel(
            id=self.id, playbook_corpus=self.playbook_corpus, corpora=self.corpora,
            created_at=self.created_at, trained_by=self.trained_by, records=self.records,
            queries=self.queries, examples=self.examples, seconds=self.seconds,
            trees=self.trees, alpha=self.alpha, used=self.trees > 0,
            reason=self.reason, ndcg10_boost=self.ndcg10_boost,
            ndcg10_ranker=self.ndcg10_ranker, cv=self.cv, features=self.features,
            current=current)


class RankerSaved(msgspec.Struct):
    id: int
    created_at: datetime


class StoredRankers(msgspec.Struct):
    """GET /internal/rankers (newest first, without `model`) and /internal/rankers/current
    (the newest of each playbook and corpora, with it)."""

    rankers: list[StoredRanker]
