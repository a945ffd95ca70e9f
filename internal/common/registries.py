"""Registering a function under a name its declaration holds (no I/O): the search modes'
functions (internal.vectord.search.registry) and the fusion methods'
(internal.vectord.search.fusion), declared in lakehouse.wire.modes."""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import TypeVar

F = TypeVar("F")


def registrar(table: dict[str, F], declared: Container[str], kind: str
              ) -> Callable[[str], Callable[[F], F]]:
    """A decorator factory: `@register(name)` puts the function in `table` under `name`,
    which `declared` must hold, once."""
    def register(name: str) -> Callable[[F], F]:
        if name not in declared:
            raise ValueError(f"{kind} {name!r}: declare it in lakehouse.wire.modes first")

        def add(fn: F) -> F:
            if name in table:
                raise ValueError(f"{kind} {name!r} has its function already")
            table[name] = fn
            return fn

        return add

    return register
