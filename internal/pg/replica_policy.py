"""Which read replica a search may use: the pure part (no I/O).

A standby's lag is measured in time without trusting clocks across servers: the primary's
WAL position is sampled on a schedule, and a standby that has replayed up to position R is
as far behind as the time since the primary first passed R (0 once it has replayed the
newest sample). An idle primary therefore never makes a caught-up standby look late.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from internal.common.lsn import format_lsn, parse_lsn

__all__ = ["PrimarySamples", "ReplicaState", "choose", "format_lsn", "judge", "parse_lsn"]

# States of a standby; only OK takes searches.
OK = "ok"
DOWN = "down"  # unreachable
LAGGING = "lagging"  # more than max_replica_lag behind (or replay paused while behind)
NOT_STANDBY = "not_standby"  # a primary (or promoted): it no longer follows ours
STARTING = "starting"  # not checked yet


class PrimarySamples:
    """The primary's WAL position over the last `keep` samples, oldest first."""

    def __init__(self, keep: int = 1200) -> None:
        self._samples: deque[tuple[float, int]] = deque(maxlen=keep)

    def add(self, at: float, lsn: int) -> None:
        if not self._samples or lsn > self._samples[-1][1]:
            self._samples.append((at, lsn))
        # An unchanged position adds nothing: the time it was first seen is what counts.

    @property
    def newest(self) -> int | None:
        return self._samples[-1][1] if self._samples else None

    def lag_seconds(self, replayed: int, now: float) -> float:
        """How long ago the primary first stood past `replayed` (0: caught up)."""
        for at, lsn in self._samples:
            if lsn > replayed:
                return max(0.0, now - at)
        return 0.0


@dataclass
class ReplicaState:
    name: str  # what /readyz shows (the DSN without its password)
    state: str = STARTING
    lag: float = 0.0  # seconds
    replayed: int = 0  # WAL position replayed
    reason: str = ""  # why it is not OK

    @property
    def usable(self) -> bool:
        return self.state == OK


def judge(reachable: bool, in_recovery: bool | None, lag: float, max_lag: float) -> tuple[str, str]:
    """(state, reason) of a standby from one check."""
    if not reachable:
        return DOWN, "unreachable"
    if not in_recovery:
        return NOT_STANDBY, "not in recovery: a primary, or promoted"
    if lag > max_lag:
        return LAGGING, f"{lag:.1f}s behind (max_replica_lag {max_lag:g}s)"
    return OK, ""


def choose(replicas: list[ReplicaState], current: int | None) -> int | None:
    """The standby searches use: the current one while it is OK (a vectord keeps to one,
    so its lexical cache does not swing between standbys at different positions), else
    the OK one least behind; None: the primary."""
    if current is not None and 0 <= current < len(replicas) and replicas[current].usable:
        return current
    ok = [i for i, r in enumerate(replicas) if r.usable]
    if not ok:
        return None
    return min(ok, key=lambda i: (replicas[i].lag, i))
