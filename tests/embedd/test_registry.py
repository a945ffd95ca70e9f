"""The embedding backends by name: the config's names and the registry's agree, and a
name that is neither is a start-up error naming the choices (never a silent OpenAI)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from aiohttp import web

from internal.config import ConfigError, load
from internal.config.sections import EMBEDDING_BACKENDS
from internal.embedd.registry import OPENERS
from internal.embedd.server import make_app


def test_every_backend_name_has_its_opener() -> None:
    assert tuple(OPENERS) == EMBEDDING_BACKENDS == ("local", "ollama", "openai")


def test_config_refuses_an_unknown_backend_naming_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text('[embedd]\nbackend = "cohere"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load(path, env={})
    assert err.value.key == "embedd.backend"
    assert "'cohere'" in str(err.value) and "local, ollama, openai" in str(err.value)


async def test_embedd_refuses_to_start_with_an_unknown_backend(tmp_path: Path) -> None:
    """A config built past the check (dataclasses.replace skips validate): the app's
    start fails naming the choices; before, the name silently became OpenAI."""
    cfg = load(None, env={})
    cfg = dataclasses.replace(cfg, embedd=dataclasses.replace(cfg.embedd, backend="cohere"))
    runner = web.AppRunner(make_app(cfg))
    with pytest.raises(ConfigError) as err:
        await runner.setup()
    await runner.cleanup()
    assert "'cohere' is not a backend; expected one of local, ollama, openai" in str(err.value)
