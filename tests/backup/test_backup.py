"""`lakehouse backup` and `lakehouse restore` on a real stack, with writes going on.

One stack (`lakehouse up`, embedded PostgreSQL on loopback) takes a full backup while four
writers upsert, then an incremental one once they stopped. Its data directory is wiped,
each backup restored in turn and the stack started on it: every write whose answer's
Lakehouse-LSN is at or before a backup's end point is in it, and the incremental chain
gives back exactly the stack's last state, searches included.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from internal.backup import manifest
from tests.helpers import ROOT
from tests.stack import load, upstack

CORPUS = "bk"
CORPUS32 = "bk32"  # the same seed items, stored as float32, with index settings of its own
INDEX32 = {"m": 12, "ef_construction": 48, "ef_search": 64, "exact_scan_rows": 500}
DIM = 8
WORDS = ["river", "stone", "lantern", "harbor", "meadow", "copper", "violet", "thunder"]


def lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def cli(pg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(pg),
           "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml")}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "internal.cli.main", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


async def post(session: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with session.post(url, json=body) as resp:
        data = await resp.json()
        assert resp.status in (200, 201), data
        return data


async def searches(base: str) -> list[Any]:
    """A few lexical and vector searches of both corpora: (id, score) of each hit; and
    each corpus's precision."""
    out: list[Any] = []
    async with aiohttp.ClientSession() as session:
        for corpus in (CORPUS, CORPUS32):
            url = f"{base}/v1/vectors/corpora/{corpus}"
            async with session.get(url) as resp:
                got = await resp.json()
                out.append(got["precision"])
                out.append(got["index"])
            for i, word in enumerate(WORDS[:4]):
                for body in ({"mode": "lexical", "query_text": f"{word} item", "k": 10},
                             {"mode": "vector", "query_vector": load.unit(DIM, _rng(i)),
                              "k": 10}):
                    found = await post(session, f"{url}/search", body)
                    out.append([(h["id"], round(float(h.get("score") or h["distance"]), 9))
                                for h in found["hits"]])
    return out


def _rng(i: int) -> Any:
    import random
    return random.Random(1000 + i)


async def test_backups_taken_under_writes_restore_every_acknowledged_write(
        tmp_path: Path) -> None:
    stack = upstack.start("lakehouse-backup-")
    pg = stack.tmp / "pg"
    full, inc = tmp_path / "full", tmp_path / "inc"
    try:
        base = stack.url
        async with aiohttp.ClientSession() as session:
            await post(session, f"{base}/v1/vectors/corpora",
                       {"name": CORPUS, "dim": DIM, "metric": "cosine", "language": "english"})
            seed = [{"id": f"s{i}", "vector": load.unit(DIM, _rng(50 + i)),
                     "text": f"{WORDS[i % 8]} {WORDS[(3 * i) % 8]} seed item {i}"}
                    for i in range(60)]
            await post(session, f"{base}/v1/vectors/corpora/{CORPUS}/items", {"items": seed})
            # The other precision beside it (CORPUS is float16, the default).
            await post(session, f"{base}/v1/vectors/corpora",
                       {"name": CORPUS32, "dim": DIM, "language": "english",
                        "precision": "float32", "index": INDEX32})
            await post(session, f"{base}/v1/vectors/corpora/{CORPUS32}/items", {"items": seed})
        stop = asyncio.Event()
        writing = asyncio.create_task(load.run(base, CORPUS, DIM, stop, searchers=0, writers=4))
        await asyncio.sleep(1.0)
        taken = await asyncio.to_thread(cli, pg, "backup", str(full))
        assert taken.returncode == 0, taken.stderr
        await asyncio.sleep(0.5)
        stop.set()
        writes = await writing
        assert not writes.failed("write"), writes.failed("write")[:3]
        # Quiet now: the incremental backup holds the stack's last state.
        taken_inc = await asyncio.to_thread(cli, pg, "backup", str(inc), "--incremental-from",
                                            str(full))
        assert taken_inc.returncode == 0, taken_inc.stderr
        assert "incremental backup" in taken_inc.stdout
        before = await searches(base)
        stored = await load.stored_ids(base, CORPUS)
    finally:
        stack.stop()
    info_full = json.loads((full / manifest.INFO_FILE).read_text())
    end = lsn(info_full["end_lsn"])
    inside = {i for i, pos in writes.lsn.items() if lsn(pos) <= end}
    after = set(writes.acked) - inside
    assert len(inside) > 20 and after, (len(inside), len(after))  # writes ran across its end
    assert info_full["corpora"] == 2 and info_full["items"] >= 120

    # Wiped, then the full backup back: every write acknowledged before its end is there.
    shutil.rmtree(pg)
    restored = cli(pg, "restore", str(full))
    assert restored.returncode == 0, restored.stderr
    again = upstack.start("lakehouse-backup-full-", {"LAKEHOUSE_VECTORD_DATA_DIR": str(pg)})
    try:
        ids = await load.stored_ids(again.url, CORPUS)
    finally:
        again.stop()
    assert inside <= ids and {f"s{i}" for i in range(60)} <= ids
    assert ids <= stored

    # The incremental chain, over the restored directory (--force keeps it aside).
    refused = cli(pg, "restore", str(inc))
    assert refused.returncode == 2 and "--force" in refused.stderr
    restored = cli(pg, "restore", str(inc), "--force")
    assert restored.returncode == 0, restored.stderr
    assert "a chain of 2 backups" in restored.stdout
    again = upstack.start("lakehouse-backup-inc-", {"LAKEHOUSE_VECTORD_DATA_DIR": str(pg)})
    try:
        assert await load.stored_ids(again.url, CORPUS) == stored
        assert await searches(again.url) == before
        assert before[0] == "float16" and "float32" in before and INDEX32 in before
    finally:
        again.stop()
    for aside in pg.parent.glob(f"{pg.name}.replaced-*"):
        shutil.rmtree(aside)


def test_restore_refuses_what_is_not_a_backup_and_a_running_server(tmp_path: Path) -> None:
    pg = tmp_path / "pg"
    not_backup = tmp_path / "plain"
    not_backup.mkdir()
    (not_backup / "notes.txt").write_text("hello")
    out = cli(pg, "restore", str(not_backup))
    assert out.returncode == 2 and "not a Lakehouse backup" in out.stderr
    assert not pg.exists()  # nothing changed

    from internal.pg import embedded

    # No data directory: nothing to back up, and no empty cluster made to back up.
    refused = cli(pg, "backup", str(tmp_path / "b"))
    assert refused.returncode == 2 and f"no PostgreSQL data directory at {pg}" in refused.stderr
    assert not pg.exists() and not (tmp_path / "b").exists()
    embedded.start(pg).stop()  # a stack's data directory, its server stopped
    took = cli(pg, "backup", str(tmp_path / "b"))  # starts the embedded server for it
    assert took.returncode == 0, took.stderr
    out = cli(pg, "backup", str(tmp_path / "b"))
    assert out.returncode == 2 and "not an empty folder" in out.stderr

    newer = tmp_path / "newer"
    shutil.copytree(tmp_path / "b", newer)
    info = json.loads((newer / manifest.INFO_FILE).read_text())
    info["pg_major"] += 1
    (newer / manifest.INFO_FILE).write_text(json.dumps(info))
    out = cli(pg, "restore", str(newer), "--force")
    assert out.returncode == 2 and "newer than this Lakehouse's PostgreSQL" in out.stderr

    server = embedded.start(pg)  # a running server in the data directory
    try:
        out = cli(pg, "restore", str(tmp_path / "b"), "--force")
        assert out.returncode == 2 and "is running" in out.stderr
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["full", "incremental"])
def test_chain_is_oldest_first(tmp_path: Path, kind: str) -> None:
    def info(k: str, parent: str | None) -> manifest.BackupInfo:
        return manifest.BackupInfo(format=1, kind=k, pg_major=18, started_at="", ended_at="",
                                   start_lsn="0/1", end_lsn="0/2", timeline=1, corpora=0,
                                   items=0, bytes=0, source="", incremental_from=parent)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    table = {a: info("full", None), b: info("incremental", str(a)),
             c: info("incremental", str(b))}
    start = c if kind == "incremental" else a
    got = manifest.chain(start, reader=lambda p: table[p])
    assert [p for p, _ in got] == ([a, b, c] if kind == "incremental" else [a])
    table[a] = info("incremental", str(c))
    with pytest.raises(manifest.NotABackup, match="loops"):
        manifest.chain(c, reader=lambda p: table[p])
