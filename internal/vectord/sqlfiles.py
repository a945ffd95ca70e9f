"""The SQL functions vectord installs (PL/pgSQL and SQL), kept as `.sql` files beside this
module and shipped as package data (pyproject's package-data takes *.sql)."""

from __future__ import annotations

from importlib import resources


def read(name: str) -> str:
    """The text of one of this package's .sql files, as the file holds it."""
    return (resources.files("internal.vectord") / name).read_text(encoding="utf-8")
