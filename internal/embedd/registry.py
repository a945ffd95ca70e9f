"""The embedding backends by name: one opener each, the one place that says which class
serves a name. A name with no opener is a start-up error naming the choices (the config
refuses it first; this refuses a config built around that check)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp

from internal.config import ConfigError, EmbeddConfig
from internal.config.sections import EMBEDDING_BACKENDS
from internal.embedd.backends import Backend, LocalBackend, OllamaBackend, OpenAIBackend

# (the embedd section, the app's HTTP session) -> the opened backend.
Opener = Callable[[EmbeddConfig, aiohttp.ClientSession], Awaitable[Backend]]


async def _local(cfg: EmbeddConfig, session: aiohttp.ClientSession) -> Backend:
    return await LocalBackend.open(cfg)


async def _ollama(cfg: EmbeddConfig, session: aiohttp.ClientSession) -> Backend:
    return OllamaBackend(cfg)


async def _openai(cfg: EmbeddConfig, session: aiohttp.ClientSession) -> Backend:
    return OpenAIBackend(cfg, session)


OPENERS: dict[str, Opener] = {"local": _local, "ollama": _ollama, "openai": _openai}
assert tuple(OPENERS) == EMBEDDING_BACKENDS, "every backend name the config takes has its opener"


async def open_backend(kind: str, cfg: EmbeddConfig, session: aiohttp.ClientSession) -> Backend:
    """The backend named kind, opened; ConfigError (embedd.backend) for an unknown name."""
    opener = OPENERS.get(kind)
    if opener is None:
        raise ConfigError("embedd.backend", f"{kind!r} is not a backend; expected one of "
                          f"{', '.join(OPENERS)}")
    return await opener(cfg, session)
