"""Limits on decoded JSON that msgspec does not enforce, each naming the field (no I/O).

- Free-form values (`Any`, such as `items[].metadata`, `filter.metadata`, matrixd's
  `filter`/`prefer`) may nest at most MAX_DEPTH levels. msgspec has no depth limit of
  its own: past Python's recursion limit (~1,000 levels) it raises RecursionError,
  and anything deep that gets through costs stack in PostgreSQL's jsonb parser and in
  every encoder after it. The check walks only the fields whose type can hold free-form
  data (found once per request type with msgspec.inspect), so a 1,000-item batch of
  vectors costs one walk over each item's metadata and nothing else.
- No string (nor object key) may hold a NUL character: PostgreSQL text cannot store
  one, and every string of every request can end up in a text column or a query.
- Invalid UTF-8 inside a string is named by the field that holds it.

The helpers that name a field re-read the body with the standard library; they run
only after a body was already found to be bad.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import inspect

MAX_DEPTH = 64  # levels of nesting inside one free-form field


# --- which parts of a request type can hold free-form data -----------------------------

def _holds_free_form(t: inspect.Type, seen: frozenset[type] = frozenset()) -> bool:
    if isinstance(t, inspect.AnyType):
        return True
    if isinstance(t, (inspect.ListType, inspect.SetType, inspect.FrozenSetType,
                      inspect.VarTupleType)):
        return _holds_free_form(t.item_type, seen)
    if isinstance(t, inspect.DictType):
        return _holds_free_form(t.value_type, seen)
    if isinstance(t, inspect.UnionType):
        return any(_holds_free_form(u, seen) for u in t.types)
    if isinstance(t, inspect.StructType):
        if t.cls in seen:
            return False
        return any(_holds_free_form(f.type, seen | {t.cls}) for f in t.fields)
    return False


@functools.lru_cache(maxsize=256)
def _type_info(type_: Any) -> inspect.Type:
    return inspect.type_info(type_)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def depth(value: Any, limit: int) -> int:
    """Levels of nesting of value (a scalar is 0, [] or {} is 1); stops counting past limit."""
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return 0
    deepest = 0
    for child in children:
        if isinstance(child, (dict, list)):
            if deepest >= limit:  # already too deep: no need to look further
                break
            deepest = max(deepest, depth(child, limit))
    return 1 + deepest


def _pick_union(value: Any, t: inspect.UnionType) -> inspect.Type | None:
    for u in t.types:
        if isinstance(u, inspect.StructType) and isinstance(value, u.cls):
            return u
        if isinstance(u, (inspect.ListType, inspect.VarTupleType)) and isinstance(value, list):
            return u
        if isinstance(u, inspect.DictType) and isinstance(value, dict):
            return u
        if isinstance(u, inspect.AnyType):
            return u
    return None


def too_deep(value: Any, t: inspect.Type, path: str, limit: int) -> str | None:
    """The first free-form field of value (typed t) nested deeper than limit, or None."""
    if isinstance(t, inspect.AnyType):
        return path or "body" if depth(value, limit) > limit else None
    if isinstance(t, inspect.UnionType):
        chosen = _pick_union(value, t)
        return None if chosen is None else too_deep(value, chosen, path, limit)
    if isinstance(t, inspect.StructType):
        if not isinstance(value, msgspec.Struct):
            return None
        for f in t.fields:
            if _holds_free_form(f.type):
                found = too_deep(getattr(value, f.name), f.type, _join(path, f.encode_name), limit)
                if found:
                    return found
        return None
    if isinstance(t, inspect.DictType) and isinstance(value, dict):
        if isinstance(t.value_type, inspect.AnyType):  # a free-form object: metadata
            return (path or "body") if depth(value, limit) > limit else None
        if _holds_free_form(t.value_type):
            for k, v in value.items():
                found = too_deep(v, t.value_type, _join(path, str(k)), limit)
                if found:
                    return found
        return None
    if isinstance(t, (inspect.ListType, inspect.VarTupleType)) and isinstance(value, list):
        if isinstance(t.item_type, inspect.AnyType):
            return (path or "body") if depth(value, limit) > limit else None
        if _holds_free_form(t.item_type):
            for i, v in enumerate(value):
                found = too_deep(v, t.item_type, f"{path}[{i}]", limit)
                if found:
                    return found
    return None


def check_depth(value: Any, type_: Any, limit: int = MAX_DEPTH) -> str | None:
    """The field of a decoded request whose free-form value nests deeper than limit."""
    t = _type_info(type_)
    if not _holds_free_form(t):
        return None
    return too_deep(value, t, "", limit)


# --- naming the field of a body that failed to decode ------------------------------

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}:,]', re.DOTALL)


def deep_path(raw: bytes, limit: int) -> list[str | int] | None:
    """The key/index path to the first container nested deeper than limit, from raw bytes.

    A regular-expression tokenizer (strings, brackets, separators); used only when
    decoding already failed with RecursionError, so its cost is paid by bad requests.
    """
    stack: list[list[Any]] = []  # [kind, key or index, expecting a key]
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        c = tok[:1]
        if c in (b"{", b"["):
            if len(stack) >= limit:
                return [frame[1] for frame in stack]
            stack.append([c, None if c == b"{" else 0, c == b"{"])
        elif c in (b"}", b"]"):
            if stack:
                stack.pop()
        elif c == b",":
            if stack:
                top = stack[-1]
                if top[0] == b"[":
                    top[1] += 1
                else:
                    top[2] = True
        elif c == b":":
            if stack:
                stack[-1][2] = False
        elif stack and stack[-1][0] == b"{" and stack[-1][2]:
            try:
                stack[-1][1] = json.loads(tok)
            except ValueError:
                stack[-1][1] = tok[1:-1].decode("utf-8", "replace")
    return None


def field_of_path(segments: list[str | int], type_: Any) -> str:
    """The request field a raw path falls in: the path cut where the type turns free-form."""
    t: inspect.Type | None = _type_info(type_)
    out = ""
    for seg in segments:
        if isinstance(t, inspect.UnionType):
            t = next((u for u in t.types if not isinstance(u, inspect.NoneType)), None)
        if isinstance(seg, int):
            out = f"{out}[{seg}]"
            t = t.item_type if isinstance(t, (inspect.ListType, inspect.VarTupleType)) else None
        else:
            out = _join(out, str(seg))
            if isinstance(t, inspect.StructType):
                t = next((f.type for f in t.fields if f.encode_name == seg), None)
            elif isinstance(t, inspect.DictType):
                t = t.value_type
            else:
                t = None
        if isinstance(t, inspect.UnionType):
            t = next((u for u in t.types if not isinstance(u, inspect.NoneType)), None)
        free = isinstance(t, inspect.AnyType) or (
            isinstance(t, inspect.DictType) and isinstance(t.value_type, inspect.AnyType))
        if t is None or free:
            return out
    return out or "body"


def _find_string(obj: Any, bad: Callable[[str], bool], path: str = "") -> str | None:
    """The path of the first string (or object key) for which bad() holds."""
    if isinstance(obj, str):
        return (path or "body") if bad(obj) else None
    if isinstance(obj, dict):
        for k, v in obj.items():
            if bad(k):
                return path or "body"
            found = _find_string(v, bad, _join(path, k))
            if found:
                return found
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found = _find_string(v, bad, f"{path}[{i}]")
            if found:
                return found
    return None


def _has_nul(s: str) -> bool:
    return "\x00" in s


_SURROGATE = re.compile("[\udc80-\udcff]")


def nul_field(raw: bytes) -> str | None:
    """The field of the first string holding a NUL character, or None if none does."""
    try:
        return _find_string(json.loads(raw), _has_nul)
    except (ValueError, RecursionError):
        return None


def bad_utf8_field(raw: bytes) -> str | None:
    """The field of the first string that is not valid UTF-8 (None: not found)."""
    try:
        loose = json.loads(raw.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    return _find_string(loose, lambda s: _SURROGATE.search(s) is not None)
