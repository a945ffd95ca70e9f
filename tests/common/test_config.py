"""Config: strict at start-up; an unknown key, wrong type or contradictory pair names the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from internal.config import ConfigError, load, redacted
from tests.helpers import ROOT


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lakehouse.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_repo_config_loads() -> None:
    cfg = load(ROOT / "lakehouse.toml", env={})
    assert cfg.vectord.port == 3212 and Path(cfg.vectord.data_dir).is_absolute()


@pytest.mark.parametrize(("text", "env", "key", "words"), [
    ("[vectord]\npool_maxx = 3\n", {}, "vectord.pool_maxx", "unknown key"),
    ("[vectrod]\n", {}, "vectrod", "unknown section"),
    ('[vectord]\npool_max = "ten"\n', {}, "vectord.pool_max", '"ten"'),
    ("[vectord]\nport = 1.5\n", {}, "vectord.port", "expected int"),
    ("", {"LAKEHOUSE_VECTORD_POOL_MAX": "ten"}, "vectord.pool_max", '"ten"'),
    ("[vectord]\npool_min = 5\npool_max = 2\n", {}, "vectord.pool_max", ">= pool_min"),
    ('[embedd]\nbackend = "openai"\n', {}, "embedd.openai_base_url", "openai"),
    ("[vectord]\nfusion_rrf_k = 100001\n", {}, "vectord.fusion_rrf_k", "1..100000"),
])
def test_bad_config_names_the_key(tmp_path: Path, text: str, env: dict[str, str], key: str,
                                  words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(_write(tmp_path, text), env=env)
    assert info.value.key == key
    assert str(info.value).startswith(f"config error: {key}: ") and words in str(info.value)


def test_env_overrides_file(tmp_path: Path) -> None:
    path = _write(tmp_path, '[vectord]\nport = 4000\ndsn = "postgresql://a"\n')
    cfg = load(path, env={"LAKEHOUSE_VECTORD_PORT": "4001", "LAKEHOUSE_PG_DSN": "postgresql://b"})
    assert cfg.vectord.port == 4001 and cfg.vectord.dsn == "postgresql://b"
    assert redacted(cfg)["vectord"]["dsn"] == "***"


@pytest.mark.parametrize("module", ["internal.vectord.server"])
def test_daemon_exits_1_on_bad_config(tmp_path: Path, module: str) -> None:
    path = _write(tmp_path, "[vectord]\nhnsw_mm = 16\n")
    env = {**os.environ, "LAKEHOUSE_CONFIG": str(path)}
    out = subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "config error: vectord.hnsw_mm: unknown key" in out.stderr
