"""vectord's search function per mode: each mode's module registers its own (`searches`).

What a mode is (its needs, its merge rule, whether it fuses) is declared in
lakehouse.wire.modes; here only how vectord runs it. A mode is one async function: (store,
the checked options, one outcome a corpus, what the caller adds to the union) -> the
ranked hits over every corpus, the top k plus every included item.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from internal.api.vectord import Hit
from internal.common.registries import registrar
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome
from internal.vectord.storage.store import Store
from lakehouse.wire.modes import MODES

Search = Callable[[Store, Options, list[Outcome], Federation], Awaitable[list[Hit]]]
SEARCHES: dict[str, Search] = {}
# `@searches("<mode>")`: the decorated function is the search of that mode (in MODES).
searches = registrar(SEARCHES, MODES, "mode")
