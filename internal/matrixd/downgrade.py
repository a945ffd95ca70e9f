"""The downgrade gate: hits meeting a configured condition go below every hit meeting none.

It runs after the relevance filter and before the playbook boost ("relevance, downgrade,
playbook"). A downgraded hit is not dropped: it keeps its place relative to the other
downgraded hits, below all the others, and carries `downgraded: [reasons]`:
- `weak`:     vector distance above `max_distance` (vector mode), or the hit's own score
              (vectord's fused score in hybrid mode, BM25 in lexical) below `min_score`
              (score-ranked modes);
- `stale`:    `updated_at` older than `max_age_days` before now;
- `disputed`: a playbook entry matching the query marks the answer wrong (score < 0).
A threshold of 0 is off (no distance is above "anything" usefully at 0, no score below 0).
No I/O here: the caller passes the clock and the disputed answers.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, MutableSequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from internal.api.responses import DowngradeSummary, RankedHit
from internal.matrixd.boost import Ranking

REASONS = ("weak", "stale", "disputed")


@dataclass(frozen=True)
class Rules:
    """The gate's conditions; 0 / False switches a condition off."""

    max_distance: float = 0.0
    min_score: float = 0.0
    max_age_days: float = 0.0
    disputed: bool = False

    @property
    def active(self) -> bool:
        return bool(self.max_distance or self.min_score or self.max_age_days or self.disputed)

    def summary(self, downgraded: int) -> DowngradeSummary:
        """The answer's `downgrade`: these thresholds and how many hits the gate moved."""
        return DowngradeSummary(max_distance=self.max_distance, min_score=self.min_score,
                                max_age_days=self.max_age_days, disputed=self.disputed,
                                downgraded=downgraded)

    def to_json(self) -> dict[str, Any]:
        return {"max_distance": self.max_distance, "min_score": self.min_score,
                "max_age_days": self.max_age_days, "disputed": self.disputed}


class RuleError(ValueError):
    """A bad condition; `key` names it."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key


def check_threshold(value: Any, key: str) -> float:
    """The value as a float, or RuleError naming key when it is negative or not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RuleError(key, f"must be a finite number, got {value!r}")
    if value < 0:
        raise RuleError(key, f"must not be negative (0 is off), got {value!r}")
    return float(value)


def combine(defaults: Rules, overrides: Mapping[str, Any]) -> Rules:
    """The configured rules with a request's keys laid over them (each key checked)."""
    values = defaults.to_json()
    for key, value in overrides.items():
        if key not in values:
            raise RuleError(key, f"unknown downgrade condition; expected one of {', '.join(values)}")
        if key == "disputed":
            if not isinstance(value, bool):
                raise RuleError(key, f"expected true or false, got {value!r}")
            values[key] = value
        else:
            values[key] = check_threshold(value, key)
    return Rules(**values)


def reasons(hit: RankedHit, rules: Rules, ranking: Ranking, now: datetime,
            disputed: Collection[tuple[str, str]] = ()) -> list[str]:
    """The conditions this hit meets, in REASONS order (empty: not downgraded).

    A hit lacking the quantity a condition reads (no distance, no score) does not meet
    that condition: the gate never guesses.
    """
    out: list[str] = []
    if ranking == "distance" and rules.max_distance:
        if hit.distance is not None and hit.distance > rules.max_distance:
            out.append("weak")
    elif ranking == "score" and rules.min_score:
        if hit.score is not None and hit.score < rules.min_score:
            out.append("weak")
    if rules.max_age_days:
        t = hit.updated_at if hit.updated_at.tzinfo is not None else (
            hit.updated_at.replace(tzinfo=UTC))
        if t < now - timedelta(days=rules.max_age_days):
            out.append("stale")
    if rules.disputed and ((hit.corpus, hit.id) in disputed
                           or (hit.corpus, hit.document_id) in disputed):
        out.append("disputed")
    return out


def apply(hits: MutableSequence[RankedHit], rules: Rules, ranking: Ranking,
          now: datetime, disputed: Collection[tuple[str, str]] = ()) -> int:
    """Mark every hit (`downgraded`: its reasons), move the marked ones below the rest.

    Both groups keep their order (a stable partition). Returns how many were downgraded.
    The distance and score read are the ones the hits carry now: run this before the
    playbook boost changes them.
    """
    if not rules.active:
        return 0
    kept: list[RankedHit] = []
    down: list[RankedHit] = []
    for hit in hits:
        hit.downgraded = reasons(hit, rules, ranking, now, disputed)
        (down if hit.downgraded else kept).append(hit)
    hits[:] = kept + down
    return len(down)
