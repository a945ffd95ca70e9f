"""The nearest name to a mistyped one ("did you mean handbook?"): pure, no I/O."""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, with a swap of two neighbouring letters counted as one edit."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def nearest(name: str, names: Iterable[str]) -> str | None:
    """The closest of `names` to `name` when it is close: at most 1 edit for a name of up
    to 4 letters, 2 up to 8, 3 beyond; ties go to the alphabetically first."""
    limit = 1 if len(name) <= 4 else 2 if len(name) <= 8 else 3
    best: tuple[int, str] | None = None
    for other in names:
        if other == name:
            continue
        d = edit_distance(name, other)
        if d <= limit and (best is None or (d, other) < best):
            best = (d, other)
    return best[1] if best is not None else None


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """` (did you mean 'handbook'?)` for a close name, else ""."""
    close = nearest(name, names)
    return f" (did you mean {close!r}?)" if close is not None else ""
