"""How a ranked list is reshaped after fusion (no I/O): recency decay, diversity (MMR),
one hit per group, and the facet fields a request names.

Each function takes the ranked candidates as they are (best first) and returns them in
their new order; none changes a per-layer score. internal.vectord.shaping.shaped reads what
they need (vectors, dates) and applies them in the order recency, diversity, group.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from internal.common.errors import InvalidArgument

T = TypeVar("T")

# ---- recency ------------------------------------------------------------------------

# A factor never reaches 0, so a distance divided by it stays finite.
MIN_FACTOR = 1e-6


def decay(age_days: float | None, half_life_days: float) -> float:
    """0.5 ** (age / half_life): 1 for an item of now (or of the future), 0.5 at one
    half-life; 0 for an item without a date (it gets no recency credit)."""
    if age_days is None or math.isnan(age_days):
        return 0.0
    return float(0.5 ** (max(age_days, 0.0) / half_life_days))


def recency_factor(age_days: float | None, half_life_days: float, weight: float) -> float:
    """The ranking key's factor: (1 - weight) + weight x decay, in [1 - weight, 1].

    Score-ranked modes rank by merge_score x factor; vector mode by merge_distance / factor.
    weight 0: every factor 1 (today's order); weight 1: the decay alone.
    """
    return max(MIN_FACTOR, (1.0 - weight) + weight * decay(age_days, half_life_days))


def age_days(value: Any, now: datetime) -> float | None:
    """Days from value (a datetime or an ISO 8601 string) to now; None when it is no date."""
    when: datetime
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    return (now - when).total_seconds() / 86400.0


def rerank(items: Sequence[T], keys: Sequence[float], descending: bool) -> list[T]:
    """items ordered by their new keys; ties keep the old order (a stable sort)."""
    order = sorted(range(len(items)), key=lambda i: -keys[i] if descending else keys[i])
    return [items[i] for i in order]


# ---- diversity ------------------------------------------------------------------------

Space = Hashable  # vectors of one space (model, dimension) are comparable


def normalized(relevance: Sequence[float]) -> list[float]:
    """Min-max scaled to [0, 1] (all equal: all 1), so λ weighs like against like."""
    if not relevance:
        return []
    lo, hi = min(relevance), max(relevance)
    if hi - lo <= 0:
        return [1.0] * len(relevance)
    return [(r - lo) / (hi - lo) for r in relevance]


def mmr(relevance: Sequence[float], vectors: Sequence[npt.NDArray[np.float32] | None],
        spaces: Sequence[Space], diversity: float, k: int) -> list[int]:
    """Maximal marginal relevance: the indexes of k candidates, in the order picked.

    Each pick maximizes (1 - diversity) x rel - diversity x max cosine to those picked,
    rel the candidate's relevance min-max scaled. Vectors of different spaces (another
    model or dimension) count as unrelated (similarity 0); a candidate without a vector
    too. diversity 0: the relevance order.
    """
    n = len(relevance)
    if n == 0:
        return []
    rel = np.asarray(normalized(relevance))
    dim = max((v.shape[0] for v in vectors if v is not None), default=1)
    unit = np.zeros((n, dim), dtype=np.float32)
    for i, v in enumerate(vectors):
        norm = float(np.linalg.norm(v)) if v is not None else 0.0
        if v is not None and norm > 0:
            unit[i, :v.shape[0]] = v / norm  # zero-padded: a cosine within a space is kept
    # Cosines of every pair at once; pairs of different spaces are unrelated.
    keys = list(spaces)
    same = np.array([[a == b for b in keys] for a in keys], dtype=bool)
    sim = np.where(same, unit @ unit.T, 0.0)
    closest = np.zeros(n)  # max similarity to a candidate picked
    free = np.ones(n, dtype=bool)
    picked: list[int] = []
    while len(picked) < min(k, n):
        gain = np.where(free, (1.0 - diversity) * rel - diversity * closest, -np.inf)
        best = int(np.argmax(gain))  # the first of equals: the better ranked
        picked.append(best)
        free[best] = False
        closest = np.maximum(closest, sim[best])
    return picked


# ---- groups ---------------------------------------------------------------------------

@dataclass
class Group:
    leader: int  # index of the group's best candidate
    members: list[int]  # the next best, up to group_size - 1
    count: int  # the group's candidates among those ranked


def group(keys: Sequence[Hashable | None], group_size: int, k: int) -> list[Group]:
    """At most one candidate per key among the first k groups, best first.

    A candidate whose key is None (the field absent) is a group of its own.
    """
    out: list[Group] = []
    by_key: dict[Hashable, Group] = {}
    for i, key in enumerate(keys):
        if key is None:
            if len(out) < k:
                out.append(Group(i, [], 1))
            continue
        g = by_key.get(key)
        if g is not None:
            g.count += 1
            if len(g.members) < group_size - 1:
                g.members.append(i)
        elif len(out) < k:
            g = Group(i, [], 1)
            by_key[key] = g
            out.append(g)
    return out


def metadata_key(field: str) -> str | None:
    """The key of a "metadata.<key>" field name; None for any other name."""
    prefix = "metadata."
    return field[len(prefix):] if field.startswith(prefix) and len(field) > len(prefix) else None


def group_field(group_by: str) -> str:
    """The metadata key a `group_by` names: "parent" is metadata.parent_id; 400 otherwise."""
    if group_by == "parent":
        return "parent_id"
    key = metadata_key(group_by)
    if key is not None:
        return key
    raise InvalidArgument(
        f'group_by: must be "parent" or "metadata.<key>", got {group_by!r}', field="group_by")


def group_key(metadata: dict[str, Any], key: str) -> Hashable | None:
    """A hit's group: its metadata value (lists and objects by their JSON text)."""
    value = metadata.get(key)
    if value is None:
        return None
    if isinstance(value, (list, dict)):
        return repr(value)
    return value if isinstance(value, (str, int, float, bool)) else str(value)


# ---- facets ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Facet:
    name: str  # the key of the answer's `facets` object
    kind: str  # corpus | tags | metadata | month
    key: str = ""  # the metadata key (metadata, month) or "updated_at" (month)


def facet(spec: str | tuple[str, str | None], position: int) -> Facet:
    """One facet of the request (a field name, or (field, interval)); 400 naming it."""
    where = f"facets[{position}]"
    field, interval = (spec, None) if isinstance(spec, str) else spec
    key = metadata_key(field)
    if interval is not None:
        if field == "updated_at" or key is not None:
            return Facet(field, "month", key or "updated_at")
        raise InvalidArgument(
            f'{where}.field: a date histogram needs "updated_at" or "metadata.<key>", '
            f"got {field!r}", field=f"{where}.field")
    if field in ("corpus", "tags"):
        return Facet(field, field)
    if field == "type" or key is not None:
        return Facet(field, "metadata", key or "type")
    raise InvalidArgument(
        f'{where}: must be "corpus", "tags", "type", "metadata.<key>" or '
        f'{{"field", "interval": "month"}}, got {field!r}', field=where)


def top_counts(counts: dict[str, int], size: int, by_value: bool) -> dict[str, int]:
    """The `size` most frequent values (ties by value); by_value: then in value order
    (a date histogram reads oldest to newest)."""
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
    if by_value:
        best.sort(key=lambda kv: kv[0])
    return dict(best)


def add_counts(into: dict[str, int], rows: Sequence[tuple[str, int]]) -> None:
    """Sums counts of one corpus into those of the others."""
    for value, n in rows:
        into[value] = into.get(value, 0) + int(n)
