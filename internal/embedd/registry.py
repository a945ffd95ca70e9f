"""The embedding backends by name: one opener each, the one place that says which class
serves a name. A name with no opener is a start-up error naming the choices (the config
refuses it first; this refuses a config built around that check).

The local backend is the configured numerics (`[embedd] local_numerics`) under its model
id, and each other numerics under its own id, opened when first asked and listed as
superseded by the configured one: corpora embedded by it are searched with its vectors
until vectord has moved them (docs/decisions/0034-integer-model-id.md); and the
multilingual model (`catalog.E5_ID`), opened when first asked (docs/decisions/0200)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import aiohttp

from internal.config import ConfigError, EmbeddConfig
from internal.config.sections import EMBEDDING_BACKENDS
from internal.embedd import e5_source
from internal.embedd.backends import (
    Backend,
    LazyBackend,
    LocalBackend,
    OllamaBackend,
    OpenAIBackend,
)
from internal.embedd.catalog import E5_ID
from internal.embedd.e5 import E5Model
from internal.embedd.local import DIM, MODEL_IDS

# (the embedd section, the app's HTTP session) -> the opened backends, the first the
# one the name stands for.
Opener = Callable[[EmbeddConfig, aiohttp.ClientSession], Awaitable[list[Backend]]]


async def _local(cfg: EmbeddConfig, session: aiohttp.ClientSession) -> list[Backend]:
    current = MODEL_IDS[cfg.local_numerics]
    others: list[Backend] = [
        LazyBackend("local", model, DIM, functools.partial(LocalBackend.open, cfg, numerics),
                    superseded_by=current)
        for numerics, model in MODEL_IDS.items() if numerics != cfg.local_numerics]
    # The multilingual model, opened at the first text of a corpus on it (its tokenizer
    # alone holds about 260 MB: measured, docs/decisions/0200).
    if e5_source.installed():
        others.append(LazyBackend("local", E5_ID, E5Model.dim, functools.partial(
            LocalBackend.open, cfg, load=functools.partial(E5Model, E5_ID))))
    return [await LocalBackend.open(cfg), *others]


async def _ollama(cfg: EmbeddConfig, session: aiohttp.ClientSession) -> list[Backend]:
    return [OllamaBackend(cfg)]


async def _openai(cfg: EmbeddConfig, session: aiohttp.ClientSession) -> list[Backend]:
    return [OpenAIBackend(cfg, session)]


OPENERS: dict[str, Opener] = {"local": _local, "ollama": _ollama, "openai": _openai}
assert tuple(OPENERS) == EMBEDDING_BACKENDS, "every backend name the config takes has its opener"


async def open_backends(kind: str, cfg: EmbeddConfig,
                        session: aiohttp.ClientSession) -> list[Backend]:
    """The backends of kind, opened, the one the name stands for first; ConfigError
    (embedd.backend) for an unknown name."""
    opener = OPENERS.get(kind)
    if opener is None:
        raise ConfigError("embedd.backend", f"{kind!r} is not a backend; expected one of "
                          f"{', '.join(OPENERS)}")
    return await opener(cfg, session)
