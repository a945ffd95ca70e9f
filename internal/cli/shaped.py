"""Shaped search results for a terminal (no I/O): highlighted passages, groups, facets,
the corpora weighed for the question.

Fragments come HTML-escaped with `<mark>` around the matched words (the only literal
tags in them); here the marks become ANSI bold on a terminal (nothing elsewhere) and the
text is unescaped. Control characters of the stored text are dropped first, so a stored
escape sequence cannot restyle the terminal.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

BOLD, PLAIN = "\x1b[1m", "\x1b[0m"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def fragment(text: str, tty: bool) -> str:
    """One highlight fragment as terminal text."""
    clean = _CONTROL.sub("", text)
    clean = clean.replace("<mark>", BOLD if tty else "").replace("</mark>", PLAIN if tty else "")
    return html.unescape(clean)


def hit_lines(rank: int, highlight: Any, group: Any, tty: bool) -> list[str]:
    """A hit's passages and its group's size, indented under its rank."""
    out = []
    frags = highlight.get("text") if isinstance(highlight, dict) else None
    if isinstance(frags, list) and frags:
        out.append(f"{rank:>3}  " + " … ".join(fragment(str(f), tty) for f in frags))
    if isinstance(group, dict) and isinstance(group.get("count"), int) and group["count"] > 1:
        out.append(f"     {group['count']} hits in {group.get('key')}")
    return out


def facet_lines(facets: dict[str, dict[str, int]] | None) -> list[str]:
    """One line per facet: its values with their counts, most frequent first."""
    return [f"{name}: " + (", ".join(f"{v} ({n})" for v, n in counts.items()) or "none")
            for name, counts in (facets or {}).items()]


def csv(value: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def options(highlight: bool, group_by: str | None, facets: Sequence[str] | None,
            diversity: float | None) -> dict[str, Any]:
    """Client.search's shaping arguments from the command line's."""
    out: dict[str, Any] = {}
    if highlight:
        out["highlight"] = True
    if group_by:
        out["group_by"] = group_by
    if facets:
        out["facets"] = list(facets)
    if diversity is not None:
        out["diversity"] = diversity
    return out


def selection_notes(corpora: Sequence[Any], explain: bool) -> list[str]:
    """The corpora weighed for the question ("windows x2.50"), and with `explain` why:
    the words that matched and where, the question's nearness to a corpus's name."""
    out = []
    for c in corpora:
        weight, sel = getattr(c, "weight", None), getattr(c, "selection", None)
        if weight is None and (sel is None or not sel.evidence):
            continue
        note = f"{c.corpus} x{weight if weight is not None else 1.0:.2f}"
        if explain and sel is not None and sel.evidence:
            note += " (" + ", ".join(
                f"'{e.word}' {e.source}" if e.word else f"near its {e.source} {e.share:.2f}"
                for e in sel.evidence) + ")"
        out.append(note)
    return out
