"""Markdown tables as the benchmarks print them, and the same rows as the results keep.

A column is "name" (text, left-aligned) or "name:spec" (a number formatted with the
format spec, right-aligned): ["side", "p50 ms:.2f", "QPS:.0f"]. A cell may be None
(printed empty) or a string in a number column (printed as it is)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def split(column: str) -> tuple[str, str]:
    """"p50 ms:.2f" -> ("p50 ms", ".2f"); "side" -> ("side", "")."""
    name, sep, spec = column.rpartition(":")
    if sep and spec and spec[-1] in "dfegx%," and " " not in spec:
        return name, spec
    return column, ""


def cell(value: Any, spec: str) -> str:
    if value is None:
        return ""
    if spec and isinstance(value, int | float) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cols = [split(c) for c in columns]
    lines = ["| " + " | ".join(name for name, _ in cols) + " |",
             "|" + "|".join("---:" if spec else "---" for _, spec in cols) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(v, spec) for v, (_, spec) in zip(row, cols, strict=True))
                     + " |")
    return "\n".join(lines)


def plain(value: Any) -> Any:
    """A cell as JSON keeps it (numpy numbers as Python's)."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
