"""`lakehouse restore DIR --until TIME`: a backup plus the WAL archive, replayed to a time.

vectord runs on its own embedded server with `[backup] wal_dir` set (archiving on); after
a backup, item B is written, a time T taken, item C written and its WAL segment archived.
Restored to T, the stack holds A (in the backup) and B (from the archive), not C.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from internal.config import Config
from internal.stack.postgres import postmaster_pid
from tests.helpers import ROOT, serve, url_of, with_section
from tests.vectord.vdata import call, unit

C = "/v1/vectors/corpora"


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "internal.cli.main", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


async def _ids(http: Any, url: str) -> set[str]:
    status, body = await call(http, "GET", f"{url}{C}/pitr/ids")
    assert status == 200, body
    return {row["id"] for row in body["items"]}


async def test_restore_until_a_time_replays_the_archive_up_to_it(tmp_path: Path,
                                                                 http: Any) -> None:
    from internal.vectord.server import STORE, make_app

    pg, wal = tmp_path / "pg", tmp_path / "wal"
    cfg = with_section(with_section(Config(), "vectord", dsn="", data_dir=str(pg), pool_min=1,
                                    pool_max=4), "backup", wal_dir=str(wal))
    env = {**os.environ, "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"),
           "LAKEHOUSE_VECTORD_DATA_DIR": str(pg), "LAKEHOUSE_BACKUP_WAL_DIR": str(wal)}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN"):
        env.pop(name, None)

    async def write(url: str, item_id: str) -> None:
        status, body = await call(http, "POST", f"{url}{C}/pitr/items", {"items": [
            {"id": item_id, "vector": unit(4, len(item_id)), "text": f"item {item_id}"}]})
        assert status == 200, body

    server = await serve(make_app(cfg))
    try:
        url = url_of(server)
        status, body = await call(http, "POST", f"{url}{C}", {"name": "pitr", "dim": 4,
                                                              "language": "english"})
        assert status == 201, body
        await write(url, "a")
        took = await asyncio.to_thread(cli, env, "backup", str(tmp_path / "b"))
        assert took.returncode == 0, took.stderr
        await write(url, "b")
        await asyncio.sleep(1.0)
        until = dt.datetime.now(dt.UTC)
        await asyncio.sleep(1.0)
        await write(url, "c")
        dsn = server.app[STORE].pool.dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            segment = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
            assert segment is not None
            deadline = time.monotonic() + 120  # the archiver on a loaded machine
            while not (wal / str(segment[0])).exists():
                assert time.monotonic() < deadline, sorted(os.listdir(wal))
                await asyncio.sleep(0.1)
    finally:
        await server.close()
    assert postmaster_pid(pg) is None

    early = cli(env, "restore", str(tmp_path / "b"), "--force", "--until",
                "2001-01-01T00:00:00Z")
    assert early.returncode == 2 and "before the backup ended" in early.stderr
    done = cli(env, "restore", str(tmp_path / "b"), "--force", "--until", until.isoformat())
    assert done.returncode == 0, done.stderr
    assert "recovered to" in done.stdout
    server = await serve(make_app(cfg))
    try:
        assert await _ids(http, url_of(server)) == {"a", "b"}
    finally:
        await server.close()
