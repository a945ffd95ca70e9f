"""Limits on decoded JSON that msgspec does not enforce, each naming the field (no I/O).

- Free-form values (`Any`, such as `items[].metadata`, `filter.metadata`,
  `prefer.metadata`) may nest at most MAX_DEPTH levels. msgspec has no depth limit of
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
import types
import typing
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
    kind = type(value)
    if kind is dict:
        children: Any = value.values()
    elif kind is list:
        children = value
    else:
        return 0
    deepest = 0
    for child in children:
        ck = type(child)
        if ck is dict or ck is list:
            if deepest >= limit:  # already too deep: no need to look further
                break
            d = depth(child, limit)
            if d > deepest:
                deepest = d
    return 1 + deepest


# A compiled check: (value, path, limit) -> the path of a too-deep free-form value, or None.
Check = Callable[[Any, str, int], "str | None"]


def _free(value: Any, path: str, limit: int) -> str | None:
    return (path or "body") if depth(value, limit) > limit else None


def _compile(t: inspect.Type) -> Check | None:
    """A check specialised to type t, or None when t cannot hold free-form data.

    Built once per request type: the per-request walk then does no type inspection, only
    attribute reads and the depth count of the free-form values (measured:
    docs/decisions/0075-bad-input-refused-while-decoding.md).
    """
    if not _holds_free_form(t):
        return None
    if isinstance(t, inspect.AnyType):
        return _free
    if isinstance(t, inspect.DictType):
        if isinstance(t.value_type, inspect.AnyType):  # a free-form object: metadata
            return lambda v, p, n: _free(v, p, n) if type(v) is dict else None
        inner = _compile(t.value_type)
        if inner is None:
            return None

        def check_dict(v: Any, p: str, n: int) -> str | None:
            if type(v) is dict:
                for k, x in v.items():
                    found = inner(x, _join(p, str(k)), n)
                    if found:
                        return found
            return None
        return check_dict
    if isinstance(t, (inspect.ListType, inspect.VarTupleType, inspect.SetType,
                      inspect.FrozenSetType)):
        if isinstance(t.item_type, inspect.AnyType):
            return lambda v, p, n: _free(v, p, n) if type(v) is list else None
        item = _compile(t.item_type)
        if item is None:
            return None

        def check_list(v: Any, p: str, n: int) -> str | None:
            if type(v) is list:
                for i, x in enumerate(v):
                    found = item(x, f"{p}[{i}]", n)
                    if found:
                        return found
            return None
        return check_list
    if isinstance(t, inspect.UnionType):
        options = [(u, c) for u in t.types if (c := _compile(u)) is not None]

        def check_union(v: Any, p: str, n: int) -> str | None:
            for u, c in options:
                if (isinstance(u, inspect.StructType) and isinstance(v, u.cls)) or (
                        not isinstance(u, inspect.StructType)):
                    found = c(v, p, n)
                    if found:
                        return found
            return None
        return check_union
    if isinstance(t, inspect.StructType):
        _COMPILING.add(t.cls)
        try:
            fields = [(f.name, f.encode_name, c) for f in t.fields
                      if (c := _compile_once(f.type)) is not None]
        finally:
            _COMPILING.discard(t.cls)

        def check_struct(v: Any, p: str, n: int) -> str | None:
            for name, key, c in fields:
                found = c(getattr(v, name), _join(p, key), n)
                if found:
                    return found
            return None
        return check_struct
    return None


_COMPILING: set[type] = set()


def _compile_once(t: inspect.Type) -> Check | None:
    if isinstance(t, inspect.StructType) and t.cls in _COMPILING:
        return None  # a self-referencing struct: its free-form fields are checked above
    return _compile(t)


@functools.lru_cache(maxsize=256)
def _checker(type_: Any) -> Check | None:
    return _compile(_type_info(type_))


def check_depth(value: Any, type_: Any, limit: int = MAX_DEPTH) -> str | None:
    """The field of a decoded request whose free-form value nests deeper than limit."""
    check = _checker(type_)
    return None if check is None else check(value, "", limit)


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


_SEGMENT = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def dict_key_at(raw: bytes, type_: Any, field: str) -> str | None:
    """msgspec names a bad dict value `weights[...]`; the key it is under, as `weights.vector`.

    Re-reads the body and tries each entry of that dict against the field's own type.
    """
    prefix = field.split("[...]")[0]
    try:
        node: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    owner: Any = type_
    name = ""
    for m in _SEGMENT.finditer(prefix):
        key, index = m.group(1), m.group(2)
        if index is not None:
            if not isinstance(node, list) or int(index) >= len(node):
                return None
            node = node[int(index)]
            owner = _item_type(owner)
        else:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
            name = key
            owner = _field_type(owner, key)
            if owner is None:
                return None
    if not isinstance(node, dict) or not name:
        return None
    for k, v in node.items():
        try:
            msgspec.convert({k: v}, owner)
        except msgspec.ValidationError:
            return f"{prefix}.{k}"
    return None


def _strip(t: Any) -> Any:
    """Annotated[X, ...] -> X; X | None -> X."""
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(t) if a is not type(None)]
            if len(args) != 1:
                return t
            t = args[0]
        else:
            return t


def _field_type(owner: Any, key: str) -> Any:
    owner = _strip(owner)
    if isinstance(owner, type) and issubclass(owner, msgspec.Struct):
        for f in msgspec.structs.fields(owner):
            if f.encode_name == key:
                return typing.get_type_hints(owner, include_extras=True)[f.name]
        return None
    if typing.get_origin(owner) is dict:
        return typing.get_args(owner)[1]
    return None


def _item_type(owner: Any) -> Any:
    owner = _strip(owner)
    args = typing.get_args(owner)
    return args[0] if typing.get_origin(owner) is list and args else None
