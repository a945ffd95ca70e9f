"""The cluster as `lakehouse ha status` prints it: pure shaping, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def ha_of(components: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The `ha` component vectord reported in the gateway's /readyz (None: no HA)."""
    vectord = components.get("vectord")
    return ha_in(vectord.get("detail") if isinstance(vectord, Mapping) else None)


def ha_in(vectord_readyz: Any) -> Mapping[str, Any] | None:
    """The `ha` component of vectord's own /readyz answer (None: no HA)."""
    detail = vectord_readyz
    comps = detail.get("components") if isinstance(detail, Mapping) else None
    ha = comps.get("ha") if isinstance(comps, Mapping) else None
    return ha if isinstance(ha, Mapping) else None


def from_readyz(components: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The nodes vectord reported in the gateway's /readyz (None: no HA there)."""
    ha = ha_of(components)
    nodes = ha.get("nodes") if ha is not None else None
    return [dict(n) for n in nodes if isinstance(n, Mapping)] if isinstance(nodes, list) else None


def table(nodes: list[dict[str, Any]]) -> str:
    """One line a node: name, role, state, lag (bytes), timeline, pid."""
    rows: list[tuple[str, ...]] = [("node", "role", "state", "lag", "timeline", "pid")]
    for n in nodes:
        rows.append(tuple("-" if n.get(k) is None else str(n.get(k))
                          for k in ("name", "role", "state", "lag", "timeline", "pid")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
