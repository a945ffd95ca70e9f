"""The SQL functions vectord installs (PL/pgSQL and SQL), kept as `.sql` files in the room
that installs them and shipped as package data (pyproject's package-data takes *.sql)."""

from __future__ import annotations

from importlib import resources


def read(path: str) -> str:
    """The text of one of vectord's .sql files (`room/name.sql`), as the file holds it."""
    return resources.files("internal.vectord").joinpath(*path.split("/")).read_text(
        encoding="utf-8")
