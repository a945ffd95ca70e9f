"""Semantic highlight fragments: for a hit none of whose fields holds the question's words
(vectord's highlight kind "lead" for its text and no "lexical" field: the vector layer
alone found it), the passage most similar to the question by the hit corpus's own model,
marked `highlight_kind: "semantic"`. A hit whose title matched keeps its text's lead.

The passages are cut here (`passages`, no I/O) and sent to embedd in one call per model
(its interactive lane's `nearest` route): embedd embeds them with the corpus's model and
answers, per hit, which is most similar to the query vector of that model (the one the
search itself used); the vectors stay in embedd. Like vectord's fragments, the passage is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import structlog

from internal.api.responses import RankedHit
from internal.clients.embed import Embedding
from internal.common.errors import LakehouseError
from internal.matrixd import spaces
from internal.matrixd.deps import Deps

log = structlog.get_logger()

MAX_PASSAGES = 8  # per hit: the embedding call stays one small batch
# Passages a search embeds in all: the vector-only hits in rank order take theirs while
# it lasts, later ones keep their lead. The model costs about 10 ms of CPU a passage
# here (docs/decisions/0130-semantic-passages.md).
PASSAGE_BUDGET = 8
LEAD, SEMANTIC, LEXICAL = "lead", "semantic", "lexical"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")


def passages(text: str, size: int) -> list[str]:
    """The text cut into passages of at most `size` characters: whole sentences packed
    together, a longer sentence cut at a word boundary; at most MAX_PASSAGES."""
    out: list[str] = []
    current = ""
    for sentence in _SENTENCE.split(_SPACE.sub(" ", text).strip()):
        while len(sentence) > size:
            cut = sentence.rfind(" ", 0, size + 1)
            cut = cut if cut > 0 else size
            if current:
                out.append(current)
                current = ""
            out.append(sentence[:cut])
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > size:
            out.append(current)
            current = ""
        current = f"{current} {sentence}".strip()
    if current:
        out.append(current)
    return out[:MAX_PASSAGES]


async def apply(deps: Deps, hits: list[RankedHit], fragment_chars: int,
                default: Embedding | None, vectors: spaces.Vectors | None) -> int:
    """Gives each "lead" text fragment the most similar passage instead; how many.
    A text of one passage needs no model call; the others are embedded while
    PASSAGE_BUDGET lasts, in rank order (a later hit keeps its lead)."""
    if deps.embed is None or default is None:
        return 0
    query_of: dict[str, Sequence[float]] = {default.model: default.vectors[0]}
    for qv in (vectors.query_vectors if vectors is not None else []):
        query_of[qv.model] = qv.vector
    model_of = {c: s.model for s in await spaces.spaces(deps) for c in s.corpora}
    todo: dict[str, list[tuple[RankedHit, list[str]]]] = {}
    left = PASSAGE_BUDGET
    done = 0
    for h in hits:
        kinds = h.highlight_kind
        if (not isinstance(kinds, dict) or kinds.get("text") != LEAD
                or LEXICAL in kinds.values()):
            continue  # the hit's words matched (its title): not a vector-only hit
        model = model_of.get(h.corpus) or default.model
        cut = passages(h.text, fragment_chars)
        if not cut or model not in query_of:
            continue
        if len(cut) == 1:  # the one passage is the most similar: no model call
            done += _mark(h, cut[0])
        elif len(cut) <= left:
            todo.setdefault(model, []).append((h, cut))
            left -= len(cut)
        else:
            left = 0  # spent: no later hit takes passages before this one
    for model, items in todo.items():
        try:
            nearest = await deps.embed.nearest(query_of[model], [cut for _, cut in items],
                                               model=model)
        except LakehouseError as exc:  # the lead stays: the search still answers
            log.warning("semantic_highlight_failed", model=model, error=exc.message)
            continue
        for (h, cut), i in zip(items, nearest, strict=True):
            done += _mark(h, cut[i])
    return done


def _mark(h: RankedHit, passage: str) -> int:
    """The hit's text fragment made `passage`, escaped and marked semantic; 1 if set."""
    if not (isinstance(h.highlight, dict) and isinstance(h.highlight_kind, dict)):
        return 0
    h.highlight["text"] = [html.escape(passage, quote=True)]
    h.highlight_kind["text"] = SEMANTIC
    return 1
