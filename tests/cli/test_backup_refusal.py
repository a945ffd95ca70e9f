"""`lakehouse backup` with no data directory at the configured path refuses, naming it,
and creates nothing (no empty cluster, no backup folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


def test_backup_without_a_data_directory_refuses_and_changes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "pg"
    target = tmp_path / "backup"
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(missing)}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-m", "internal.cli.main", "backup", str(target)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"no PostgreSQL data directory at {missing}" in out.stderr
    assert out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []
