"""How the client commands show what the stack answered: JSON, tables, short cells,
scores, and a refusal in one line (no I/O but printing)."""

from __future__ import annotations

import json
from typing import Any

from internal.common.errors import describe
from lakehouse.errors import LakehouseError


def print_json(value: Any) -> None:
    """An answer as indented JSON (every field the client knows, dates in ISO 8601)."""
    import msgspec

    print(json.dumps(msgspec.to_builtins(value), indent=2))


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def shorten(text: Any, width: int) -> str:
    """A cell cut to `width` (titles, texts, questions: never an id, which a reader copies)."""
    s = " ".join(str(text or "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


def format_score(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) else ""


def describe_error(exc: Exception) -> str:
    """The status, code, field and message the stack answered, and its request id (the
    one in every daemon's log line for the request)."""
    if not isinstance(exc, LakehouseError):
        return describe(exc)
    where = f" ({exc.field})" if exc.field else ""
    rid = f" [request_id {exc.request_id}]" if exc.request_id else ""
    return f"HTTP {exc.status} {exc.code}{where}: {exc.message}{rid}"
