"""The items a caller hands the client: checked into `Item` structs, and a server error
about one of them renumbered to the caller's place in its own list."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from lakehouse.errors import InvalidArgument, LakehouseError
from lakehouse.types import Item


def as_item(value: Item | Mapping[str, Any], index: int) -> Item:
    """The caller's item (a mapping checked into an Item), `items[index]` named when bad."""
    if isinstance(value, Item):
        return value
    try:
        return msgspec.convert(value, Item)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"items[{index}]: {exc}", field=f"items[{index}]") from None


_LIST_FIELD = re.compile(r"^(items|texts)\[(\d+)\]")


def renumbered(exc: LakehouseError, places: Sequence[int]) -> LakehouseError:
    """`exc` naming the caller's item: a part of the caller's items was sent (as items or
    as texts to embed), `places[j]` is where the j-th sent one is in the caller's list."""
    m = _LIST_FIELD.match(exc.field or "")
    if m is None or int(m.group(2)) >= len(places):
        return exc
    old = m.group(0)
    new = f"items[{places[int(m.group(2))]}]"
    exc.field = new + (exc.field or "")[len(old):]
    if exc.message.startswith(old):
        exc.message = new + exc.message[len(old):]
        exc.args = (exc.message,)
    return exc
