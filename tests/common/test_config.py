"""Config: strict at start-up; an unknown key, wrong type or contradictory pair names the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from internal.common.daemon import EXIT_CONFIG
from internal.config import ConfigError, load, redacted
from tests.helpers import ROOT


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lakehouse.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_repo_config_loads() -> None:
    cfg = load(ROOT / "lakehouse.toml", env={})
    assert cfg.vectord.port == 3212 and Path(cfg.vectord.data_dir).is_absolute()
    assert cfg.renamed == ()  # the shipped file uses no old name


def test_renamed_keys_are_read_and_warned_about(tmp_path: Path) -> None:
    """`rrf_k` meant two things: [vectord]'s is fusion_rrf_k, [matrixd]'s keyword_merge_k.
    The old keys still work (the new name wins when both are given) and the daemon warns
    at start-up, naming the new one."""
    from structlog.testing import capture_logs

    from internal.common.daemon import warn_renamed

    cfg = load(_write(tmp_path, "[vectord]\nrrf_k = 30\n[matrixd]\nrrf_k = 70\n"
                                "keyword_merge_k = 80\n"),
               env={"LAKEHOUSE_VECTORD_RRF_K": "40"})
    assert cfg.vectord.fusion_rrf_k == 40 and cfg.matrixd.keyword_merge_k == 80
    assert set(cfg.renamed) == {("vectord.rrf_k", "vectord.fusion_rrf_k"),
                                ("LAKEHOUSE_VECTORD_RRF_K", "LAKEHOUSE_VECTORD_FUSION_RRF_K"),
                                ("matrixd.rrf_k", "matrixd.keyword_merge_k")}
    with capture_logs() as logs:
        warn_renamed(cfg)
    assert {(e["key"], e["use"]) for e in logs if e["event"] == "config_key_renamed"
            and e["log_level"] == "warning"} == set(cfg.renamed)


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
def test_daemon_exits_on_bad_config_with_one_line(tmp_path: Path, module: str) -> None:
    path = _write(tmp_path, "[vectord]\nhnsw_mm = 16\n")
    env = {**os.environ, "LAKEHOUSE_CONFIG": str(path)}
    out = subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == EXIT_CONFIG
    # One line, nothing logged before it (no config dump).
    assert out.stderr.strip() == "config error: vectord.hnsw_mm: unknown key" and not out.stdout


def test_a_relative_path_is_taken_from_where_it_was_given(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment variable's relative path from the folder the command runs in (as a
    shell reads `LAKEHOUSE_SYNC_WIKI_DIR=docs/examples/wiki bash scripts/run.sh`), the
    config file's from the file's folder, wherever that file is."""
    conf = tmp_path / "etc"
    conf.mkdir()
    path = _write(conf, '[sync]\nwiki_dir = "pages"\n[vectord]\ndata_dir = "pg"\n')
    monkeypatch.chdir(ROOT)
    from_file = load(path, env={})
    assert from_file.sync.wiki_dir == str(conf / "pages")
    assert from_file.vectord.data_dir == str(conf / "pg")
    from_env = load(path, env={"LAKEHOUSE_SYNC_WIKI_DIR": "docs/examples/wiki"})
    assert from_env.sync.wiki_dir == str(ROOT / "docs" / "examples" / "wiki")
