"""Replica lists in the config: one address or several, for matrixd and the sync too."""

from __future__ import annotations

from pathlib import Path

from internal.common.upstream import addresses_of
from internal.config import load


def test_one_string_or_a_list(tmp_path: Path) -> None:
    f = tmp_path / "lakehouse.toml"
    f.write_text('[matrixd]\nvectord_url = ["http://a:1", "http://b:2"]\nembedd_url = ""\n'
                 '[sync]\nvectord_url = "http://c:3"\n')
    cfg = load(f, {})
    assert cfg.matrixd.vectord_url == ("http://a:1", "http://b:2")
    assert cfg.matrixd.embedd_url == ()  # empty: no embedding, as before
    assert cfg.sync.vectord_url == ("http://c:3",)
    env = {"LAKEHOUSE_MATRIXD_VECTORD_URL": "http://x:1,http://y:2"}
    assert load(None, env).matrixd.vectord_url == ("http://x:1", "http://y:2")


def test_addresses_of() -> None:
    assert addresses_of("http://a") == ("http://a",)
    assert addresses_of("") == ()
    assert addresses_of(["http://a", "", "http://b"]) == ("http://a", "http://b")
