"""The query embedded once per model in use among the searched corpora.

A corpus records the model that embedded its items. A search over corpora of several
models embeds its text once per model (embedd serves each by name) and sends vectord one
query vector per model; vectord searches each space with its own vector and fuses the
spaces as separate branches. A corpus whose model no backend serves, or whose query
embedding fails, has no vector branch: it is reported under `skipped_corpora`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from internal.api.vectord import QueryVector, Space
from internal.clients.embed import Embedding
from internal.common.errors import LakehouseError
from internal.matrixd.deps import Deps

# As long as vectord trusts its own registry rows: a corpus created within it may be
# missed, and vectord then reports it skipped (no vector of its model) rather than fail.
SPACES_TTL_SECONDS = 5.0


async def spaces(deps: Deps) -> list[Space]:
    """vectord's embedding spaces, read at most every SPACES_TTL_SECONDS."""
    now = time.monotonic()
    if now - deps.spaces_at >= SPACES_TTL_SECONDS:
        deps.spaces = (await deps.vectord.spaces()).spaces
        deps.spaces_at = now
    return deps.spaces


async def unknown_corpora(deps: Deps, corpora: Sequence[str]) -> list[str]:
    """The named corpora vectord does not hold (read once more when the cached list
    misses one: it may have been created since)."""
    if not corpora:
        return []
    for fresh in (False, True):
        if fresh:
            deps.spaces_at = float("-inf")
        known = {c for space in await spaces(deps) for c in space.corpora}
        missing = [c for c in corpora if c not in known]
        if not missing:
            break
    return missing


def other_models(known: Sequence[Space], corpora: Sequence[str] | None,
                 excluded: Sequence[str], default: str) -> dict[str, list[str]]:
    """The models other than the default one that the searched corpora record, each with
    its corpora (corpora None: every corpus but the excluded)."""
    wanted = None if corpora is None else set(corpora)
    out: dict[str, list[str]] = {}
    for space in known:
        if space.model is None or space.model == default:
            continue
        names = [c for c in space.corpora
                 if (c in wanted if wanted is not None else c not in excluded)]
        if names:
            out.setdefault(space.model, []).extend(names)
    return out


@dataclass
class Vectors:
    """The query vectors to send (one per model) and why a corpus's model gave none."""

    query_vectors: list[QueryVector]
    failed: dict[str, str]  # corpus -> reason


async def embed_all(deps: Deps, text: str, default: Embedding, corpora: Sequence[str] | None,
                    excluded: Sequence[str]) -> Vectors:
    """The default embedding and one per other model the searched corpora record,
    embedded concurrently; a model that fails is reported for each of its corpora."""
    assert deps.embed is not None
    embed = deps.embed
    others = other_models(await spaces(deps), corpora, excluded, default.model)
    vectors = [QueryVector(model=default.model, vector=default.vectors[0])]
    failed: dict[str, str] = {}

    async def one(model: str) -> Embedding | LakehouseError:
        try:
            return await embed.embed([text], input_type="query", model=model, interactive=True)
        except LakehouseError as exc:
            return exc

    results = await asyncio.gather(*(one(m) for m in others))
    for (model, names), got in zip(others.items(), results, strict=True):
        if isinstance(got, Embedding):
            vectors.append(QueryVector(model=model, vector=got.vectors[0]))
            continue
        reason = f"the query could not be embedded by model {model!r}: {got.message}"
        failed.update(dict.fromkeys(names, reason))
    return Vectors(vectors, failed)
