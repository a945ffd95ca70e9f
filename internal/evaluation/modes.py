"""The modes `lakehouse eval` scores (I/O-free, so the command's --help loads nothing else).

Derived from the registries (lakehouse.wire.modes): every mode ranked by relevance (not
newest first), and a mode that fuses once per fusion method ("hybrid-rrf") and once with
none ("hybrid": vectord's default method and weights).
"""

from __future__ import annotations

from lakehouse.wire.modes import FUSIONS, MODES


def table_modes() -> dict[str, tuple[str, str | None]]:
    """Mode name in the table -> the search request's mode and fusion method."""
    out: dict[str, tuple[str, str | None]] = {}
    for spec in MODES.values():
        if spec.merge == "newest":
            continue
        if spec.fusion:
            out.update({f"{spec.name}-{method}": (spec.name, method) for method in FUSIONS})
        out[spec.name] = (spec.name, None)
    return out
