"""The learned ranker's wire shapes (docs/API.md, "matrixd: the learned ranker"): the train
request and its answers, the models as listed, what a search says of the ranker that
ordered it (the per-candidate values vectord gives it are lakehouse.wire.features)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from lakehouse.wire.shapes import NAME_PATTERN

CorpusName = Annotated[str, Meta(pattern=NAME_PATTERN, description="corpus name")]


class TrainRanker(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/matrix/ranker/train: the playbook whose records train the model (default:
    `[matrixd] playbook_corpus`) and the corpora it ranks (default: every corpus its
    records answer that the caller sees); `wait`: answer when the model is stored (200)
    instead of at once (202)."""

    corpora: Annotated[list[CorpusName], Meta(min_length=1, max_length=64)] | None = None
    playbook_corpus: CorpusName | None = None
    wait: bool = False


class RankerModel(msgspec.Struct, kw_only=True):
    """One trained model (a version: a new training never changes an old one).

    `used`: its trees rank the searches of its corpora; false is the fallback (the
    playbook's boost alone), and `reason` says why: too few recorded questions, or trees
    whose cross-validated nDCG@10 does not beat the boost's by 1.64 standard errors.
    `ndcg10_boost` / `ndcg10_ranker`: nDCG@10 over the recorded questions by 5-fold
    cross-validation (each question's own records out of its features), the boost alone
    and the chosen number of trees."""

    id: int
    playbook_corpus: str
    corpora: list[str]
    created_at: datetime
    trained_by: str  # "auto" (the ticker), or the key that asked ("admin", a key id)
    records: int  # the playbook's entries for these corpora when it trained
    queries: int  # recorded questions with a right answer among their candidates
    examples: int  # (question, candidate) rows
    seconds: float
    trees: int
    alpha: float  # the boost's fused score's weight in the initial score
    used: bool
    reason: str | None = None
    ndcg10_boost: float | None = None
    ndcg10_ranker: float | None = None
    cv: dict[str, float] = {}  # "alpha/trees" -> cross-validated nDCG@10
    features: list[str] = []
    current: bool = False  # the newest of its playbook and corpora: the one searches use


class RankerTraining(msgspec.Struct, kw_only=True):
    """A training under way (POST .../train without `wait`: 202)."""

    state: Literal["running"] = "running"
    playbook_corpus: str
    corpora: list[str] | None  # None: every corpus the records answer
    started_at: datetime
    trained_by: str


class RankerFailure(msgspec.Struct, kw_only=True):
    """The last training of a playbook that failed (its message; the next one retries)."""

    playbook_corpus: str
    corpora: list[str] | None
    at: datetime
    error: str


class RankerStatus(msgspec.Struct, kw_only=True):
    """GET /v1/matrix/ranker: the models of the playbooks (newest first), the trainings
    running on this matrixd, its last failure, and whether it trains by itself."""

    playbook_corpus: str | None  # the one asked for (None: every playbook)
    auto: bool
    models: list[RankerModel]
    training: list[RankerTraining] = []
    failures: list[RankerFailure] = []


# ---- in a search's answer --------------------------------------------------------------------

class RankerUse(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A search's `ranker` (with `use_playbook`, when a model of the playbook exists): the
    model that ordered its hits (`applied`), or why the boost alone did (`reason`)."""

    applied: bool
    id: int | None = None
    trees: int = 0
    corpora: list[str] = []
    reranked: int = 0  # candidates the model scored
    reason: str | None = None
    ms: float | None = None
