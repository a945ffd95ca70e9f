"""Consecutive items packed into parts (I/O-free): a part closes before the item that
would take its weight past a limit, or its count past a most; an item is never split, so
one heavier than the limit is a part of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def packed(items: Sequence[T], weight: Callable[[T], int], limit: int,
           most: int | None = None) -> list[list[T]]:
    """The items in order, in parts of at most `limit` weight and `most` items."""
    out: list[list[T]] = []
    current: list[T] = []
    size = 0
    for item in items:
        n = weight(item)
        if current and ((most is not None and len(current) >= most) or size + n > limit):
            out.append(current)
            current, size = [], 0
        current.append(item)
        size += n
    if current:
        out.append(current)
    return out
