"""Drift between an answer and its struct: the keys a JSON answer holds that the struct
has no field for (msgspec drops them silently when decoding)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import msgspec.inspect as mi


def unknown_fields(value: object, t: mi.Type, path: str = "") -> list[str]:
    """The keys of a decoded JSON value that its type has no field for (recursively)."""
    if isinstance(t, mi.StructType):
        if not isinstance(value, dict):
            return []
        fields = {f.encode_name: f.type for f in t.fields}
        out = [f"{path}.{k}" for k in value if k not in fields]
        for k, v in value.items():
            if k in fields:
                out += unknown_fields(v, fields[k], f"{path}.{k}")
        return out
    if isinstance(t, mi.ListType | mi.VarTupleType) and isinstance(value, list):
        return [u for i, v in enumerate(value) for u in unknown_fields(v, t.item_type,
                                                                        f"{path}[{i}]")]
    if isinstance(t, mi.DictType) and isinstance(value, dict):
        return [u for k, v in value.items() for u in unknown_fields(v, t.value_type,
                                                                     f"{path}.{k}")]
    if isinstance(t, mi.UnionType):  # the member that fits best
        found = [unknown_fields(value, m, path) for m in t.types]
        return min(found, key=len) if found else []
    return []


def strictly(tp: Any, body: bytes) -> Any:
    """The answer decoded into tp (msgspec's strict mode: no type coercion), with no field
    left over."""
    value = msgspec.json.decode(body, type=tp, strict=True)
    left = unknown_fields(json.loads(body), mi.type_info(tp))
    assert not left, f"{tp.__name__}: fields the struct does not declare: {left}"
    return value
