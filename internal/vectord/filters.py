"""Search filters -> a SQL where-clause plus parameters, shared by every search mode.

Column names refer to the items table (unqualified); parameter names start with `f_`
so they never collide with the search's own (`q`, `k`, ...).
"""

from __future__ import annotations

from datetime import timezone
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from internal.common.errors import InvalidArgument
from internal.vectord.models import Filter

TRUE = sql.SQL("TRUE")


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with prefix (escaping % _ and \\)."""
    return escape_like(prefix) + "%"


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def build_where(flt: Filter | None, field: str = "filter") -> tuple[sql.Composable, dict[str, Any]]:
    """The where-clause (TRUE when there is nothing to filter) and its parameters."""
    if flt is None:
        return TRUE, {}
    clauses: list[sql.Composable] = []
    params: dict[str, Any] = {}
    if flt.metadata:
        clauses.append(sql.SQL("metadata @> %(f_metadata)s"))
        params["f_metadata"] = Jsonb(flt.metadata)
    if flt.id_prefix:
        # id is COLLATE "C", so LIKE 'prefix%' is a range scan on the primary key.
        clauses.append(sql.SQL("id LIKE %(f_id_prefix)s"))
        params["f_id_prefix"] = like_prefix(flt.id_prefix)
    after, before = flt.updated_after, flt.updated_before
    if after is not None and after.tzinfo is None:
        after = after.replace(tzinfo=timezone.utc)
    if before is not None and before.tzinfo is None:
        before = before.replace(tzinfo=timezone.utc)
    if after is not None and before is not None and after >= before:
        raise InvalidArgument(f"{field}.updated_before: must be later than updated_after",
                              field=f"{field}.updated_before")
    if after is not None:
        clauses.append(sql.SQL("updated_at > %(f_updated_after)s"))
        params["f_updated_after"] = after
    if before is not None:
        clauses.append(sql.SQL("updated_at < %(f_updated_before)s"))
        params["f_updated_before"] = before
    if not clauses:
        return TRUE, {}
    return sql.SQL(" AND ").join(clauses), params


def is_filtered(where: sql.Composable) -> bool:
    """True when the clause can drop rows (so the vector branch needs an iterative scan)."""
    return where is not TRUE
