"""The modes `lakehouse eval` scores (I/O-free, so the command's --help loads nothing else)."""

from __future__ import annotations

# Mode name in the table -> the search request's mode and fusion method.
# "hybrid" names no fusion: vectord's default (fusion.DEFAULT_METHOD, DEFAULT_WEIGHTS).
MODES: dict[str, tuple[str, str | None]] = {
    "vector": ("vector", None),
    "lexical": ("lexical", None),
    "hybrid-rrf": ("hybrid", "rrf"),
    "hybrid-weighted": ("hybrid", "weighted"),
    "hybrid-dbsf": ("hybrid", "dbsf"),
    "hybrid": ("hybrid", None),
}
