"""Search filters -> a SQL where-clause plus parameters, shared by every search mode.

Column names refer to the items table (unqualified); parameter names start with `f_`
so they never collide with the search's own (`q`, `k`, ...).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import msgspec
from psycopg import sql
from psycopg.types.json import Jsonb

from internal.api.vectord import Filter
from internal.common.errors import InvalidArgument

TRUE = sql.SQL("TRUE")


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with prefix (escaping % _ and \\)."""
    return escape_like(prefix) + "%"


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def build_where(flt: Filter | None, field: str = "filter") -> tuple[sql.Composable, dict[str, Any]]:
    """The where-clause (TRUE when there is nothing to filter) and its parameters."""
    clauses, params = build_clauses(flt, field, "f_")
    if not clauses:
        return TRUE, {}
    return sql.SQL(" AND ").join(clauses), params


def build_clauses(flt: Filter | None, field: str = "filter", prefix: str = "f_"
                  ) -> tuple[list[sql.Composable], dict[str, Any]]:
    """One boolean SQL expression per condition given, and their parameters.

    Filters AND them; soft preferences (`prefer`, prefix "p_") count how many hold.
    """
    if flt is None:
        return [], {}
    clauses: list[sql.Composable] = []
    params: dict[str, Any] = {}

    def param(name: str, value: Any) -> sql.Composable:
        params[prefix + name] = value
        return sql.Placeholder(prefix + name)

    if flt.metadata:
        clauses.append(sql.SQL("metadata @> {}").format(param("metadata", Jsonb(flt.metadata))))
    if flt.id_prefix:
        # id is COLLATE "C", so LIKE 'prefix%' is a range scan on the primary key.
        clauses.append(sql.SQL("id LIKE {}").format(param("id_prefix", like_prefix(flt.id_prefix))))
    after, before = flt.updated_after, flt.updated_before
    if after is not None and after.tzinfo is None:
        after = after.replace(tzinfo=timezone.utc)
    if before is not None and before.tzinfo is None:
        before = before.replace(tzinfo=timezone.utc)
    if after is not None and before is not None and after >= before:
        raise InvalidArgument(f"{field}.updated_before: must be later than updated_after",
                              field=f"{field}.updated_before")
    if after is not None:
        clauses.append(sql.SQL("updated_at > {}").format(param("updated_after", after)))
    if before is not None:
        clauses.append(sql.SQL("updated_at < {}").format(param("updated_before", before)))
    clauses.extend(_symbolic_clauses(flt, field, param))
    for i, raw in enumerate(flt.all_of or ()):
        where = f"{field}.all_of[{i}]"
        try:
            part = msgspec.convert(raw, Filter)
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"{where}: {exc}", field=where) from None
        more, more_params = build_clauses(part, where, f"{prefix}{i}_")
        clauses.extend(more)
        params.update(more_params)
    return clauses, params


_FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")


def _field_name(name: str, where: str) -> str:
    if not _FIELD_RE.match(name):
        raise InvalidArgument(f"{where}: expected a metadata key (letters, digits, _ . : -), "
                              f"got {name[:40]!r}", field=where)
    return name


def _symbolic_clauses(flt: Filter, field: str,
                      param: Callable[[str, Any], sql.Composable]) -> list[sql.Composable]:
    """Tags, type, date and number ranges, parent id, field presence.

    Metadata values of the wrong JSON type (a date that does not parse, a number
    stored as text) never match and never raise: a filter cannot fail on data.
    """
    out: list[sql.Composable] = []
    if flt.tags_any:
        out.append(sql.SQL("tags && {}::text[]").format(param("tags_any", list(flt.tags_any))))
    if flt.tags_all:
        out.append(sql.SQL("tags @> {}::text[]").format(param("tags_all", list(flt.tags_all))))
    if flt.type is not None:
        types = [flt.type] if isinstance(flt.type, str) else list(flt.type)
        if not types:
            raise InvalidArgument(f"{field}.type: must name at least one type", field=f"{field}.type")
        out.append(sql.SQL("(metadata->>'type') = ANY({}::text[])").format(param("type", types)))
    if flt.date is not None:
        d = flt.date
        key = param("date_field", _field_name(d.field, f"{field}.date.field"))
        if d.after is None and d.before is None:
            raise InvalidArgument(f"{field}.date: give after, before or both", field=f"{field}.date")
        after, before = _utc(d.after), _utc(d.before)
        if after is not None and before is not None and after >= before:
            raise InvalidArgument(f"{field}.date.before: must be later than after",
                                  field=f"{field}.date.before")
        value = sql.SQL("(CASE WHEN pg_input_is_valid(metadata->>{k}, 'timestamptz') "
                        "THEN (metadata->>{k})::timestamptz END)").format(k=key)
        parts = []
        if after is not None:
            parts.append(sql.SQL("{} >= {}").format(value, param("date_after", after)))
        if before is not None:
            parts.append(sql.SQL("{} < {}").format(value, param("date_before", before)))
        out.append(sql.SQL("coalesce({}, false)").format(sql.SQL(" AND ").join(parts)))
    if flt.range is not None:
        r = flt.range
        key = param("range_field", _field_name(r.field, f"{field}.range.field"))
        value = sql.SQL("(CASE WHEN jsonb_typeof(metadata->{k}) = 'number' "
                        "THEN (metadata->>{k})::float8 END)").format(k=key)
        parts = []
        for name, op in (("gte", ">="), ("gt", ">"), ("lte", "<="), ("lt", "<")):
            bound = getattr(r, name)
            if bound is None:
                continue
            if not math.isfinite(bound):
                raise InvalidArgument(f"{field}.range.{name}: must be finite",
                                      field=f"{field}.range.{name}")
            parts.append(sql.SQL("{} {} {}").format(value, sql.SQL(op), param(f"range_{name}", float(bound))))
        if not parts:
            raise InvalidArgument(f"{field}.range: give gte, gt, lte or lt", field=f"{field}.range")
        out.append(sql.SQL("coalesce({}, false)").format(sql.SQL(" AND ").join(parts)))
    if flt.parent_id is not None:
        out.append(sql.SQL("(metadata->>'parent_id') = {}").format(param("parent_id", flt.parent_id)))
    if flt.has:
        for i, name in enumerate(flt.has):
            _field_name(name, f"{field}.has[{i}]")
        out.append(sql.SQL("metadata ?& {}::text[]").format(param("has", list(flt.has))))
    return out


def _utc(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def is_filtered(where: sql.Composable) -> bool:
    """True when the clause can drop rows (so the vector branch needs an iterative scan)."""
    return where is not TRUE
