"""Semantic highlight fragments: for a hit none of whose fields holds the question's words
(vectord's highlight kind "lead" for its text and no "lexical" field: the vector layer
alone found it), the passage most similar to the question by the hit corpus's own model,
marked `highlight_kind: "semantic"`. A hit whose title matched keeps its text's lead.

The passages are cut here (`passages`, no I/O), embedded by embedd with the corpus's
model in one call per model, and compared with the query vector of that model (the one
the search itself used). Like vectord's fragments, the passage is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import numpy as np
import structlog

from internal.api.responses import RankedHit
from internal.clients.embed import Embedding
from internal.common.errors import LakehouseError
from internal.matrixd import spaces
from internal.matrixd.deps import Deps

log = structlog.get_logger()

MAX_PASSAGES = 8  # per hit: the embedding call stays one small batch
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


def best(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> int:
    """The index of the vector most similar (cosine) to the query."""
    q = np.asarray(query, dtype=np.float32)
    m = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
    sims = (m @ q) / np.where(norms > 0, norms, 1.0)
    return int(np.argmax(sims))


async def apply(deps: Deps, hits: list[RankedHit], fragment_chars: int,
                default: Embedding | None, vectors: spaces.Vectors | None) -> int:
    """Gives each "lead" text fragment the most similar passage instead; how many."""
    if deps.embed is None or default is None:
        return 0
    query_of: dict[str, Sequence[float]] = {default.model: default.vectors[0]}
    for qv in (vectors.query_vectors if vectors is not None else []):
        query_of[qv.model] = qv.vector
    model_of = {c: s.model for s in await spaces.spaces(deps) for c in s.corpora}
    todo: dict[str, list[tuple[RankedHit, list[str]]]] = {}
    for h in hits:
        kinds = h.highlight_kind
        if (not isinstance(kinds, dict) or kinds.get("text") != LEAD
                or LEXICAL in kinds.values()):
            continue  # the hit's words matched (its title): not a vector-only hit
        model = model_of.get(h.corpus) or default.model
        cut = passages(h.text, fragment_chars)
        if cut and model in query_of:
            todo.setdefault(model, []).append((h, cut))
    done = 0
    for model, items in todo.items():
        texts = [p for _, cut in items for p in cut]
        try:
            got = await deps.embed.embed(texts, input_type="document", model=model)
        except LakehouseError as exc:  # the lead stays: the search still answers
            log.warning("semantic_highlight_failed", model=model, error=exc.message)
            continue
        at = 0
        for h, cut in items:
            i = best(query_of[model], got.vectors[at:at + len(cut)])
            at += len(cut)
            if isinstance(h.highlight, dict) and isinstance(h.highlight_kind, dict):
                h.highlight["text"] = [html.escape(cut[i], quote=True)]
                h.highlight_kind["text"] = SEMANTIC
            done += 1
    return done
