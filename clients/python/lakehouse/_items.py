"""The items a caller hands the client: checked into `Item` structs, and a server error
about one of them renumbered to the caller's place in its own list."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from lakehouse.errors import InvalidArgument, LakehouseError, UpstreamError
from lakehouse.types import Item
from lakehouse.wire.documents import DocumentIn, Task

S = TypeVar("S", Item, DocumentIn)

def given_as(value: S | Mapping[str, Any], cls: type[S], field: str) -> S:
    """The caller's value as a cls (a mapping checked into one), the field named when bad."""
    if isinstance(value, cls):
        return value
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"{field}: {exc}", field=field) from None


def as_item(value: Item | Mapping[str, Any], index: int) -> Item:
    """The caller's item (a mapping checked into an Item), `items[index]` named when bad."""
    return given_as(value, Item, f"items[{index}]")


def as_documents(items: Sequence[Item], places: Sequence[int]) -> list[DocumentIn]:
    """The items at `places` (no vector of their own) as documents of one chunk each."""
    return [DocumentIn(id=items[i].id, text=items[i].text, title=items[i].title,
                       tags=list(items[i].tags), metadata=dict(items[i].metadata),
                       language=items[i].language) for i in places]


def check_written(tasks: Sequence[Task], items: Sequence[Item], places: Sequence[int]) -> None:
    """The first item the stack refused, raised naming `items[i]` (its place in the
    caller's list); a task that failed as a whole, raised as the stack's failure."""
    where = {items[i].id: i for i in places}
    for task in tasks:
        for err in task.errors:
            i = where.get(err.document_id)
            name = f"items[{i}]" if i is not None else "items"
            field = f"{name}.{err.field}" if err.field and err.field != "id" else name
            raise InvalidArgument(f"{name}: {err.message}", field=field, code=err.code)
        if task.state == "failed":
            raise UpstreamError(f"task {task.id} failed: {task.error}", code="task_failed")


_LIST_FIELD = re.compile(r"^(items|texts|documents)\[(\d+)\]")


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
