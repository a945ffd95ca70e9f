"""The embedded server's restart-only settings: the defaults, and others given at start."""

from __future__ import annotations

from pathlib import Path

import psycopg

from internal.pg import embedded


def _shared_buffers(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW shared_buffers").fetchone()
    assert row is not None
    return str(row[0])


def test_a_setting_given_at_start_replaces_the_default_until_the_next_start(tmp_path: Path) -> None:
    server = embedded.start(tmp_path / "pg", settings={"shared_buffers": "256MB"})  # the default is 128MB
    try:
        assert _shared_buffers(server.dsn) == "256MB"
    finally:
        server.stop()
    server = embedded.start(tmp_path / "pg")  # no settings: the defaults come back
    try:
        assert _shared_buffers(server.dsn) == embedded._SERVER_SETTINGS["shared_buffers"]
    finally:
        server.stop()
