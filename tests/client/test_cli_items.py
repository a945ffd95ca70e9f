"""`lakehouse items list|get|delete`, `lakehouse corpora delete` and the progress of `sync`
and `ingest` written to a pipe, against the shared stack (tests/client/conftest.py).

The synced folder holds real tldr pages named by a symbol (`{.md`, `}.md`, `%.md`, `$.md`)
and pages whose names hold `#`, `?`, a space and accents: every id the sync makes is
listed, read and deleted by the CLI, and `iter_items` yields exactly what `iter_ids` lists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import lakehouse
from tests.client.conftest import EXAMPLES, Live
from tests.helpers import FIXTURES, ROOT

OWN_PAGES = {"hash#tag.md": "# hash\n\nA page whose name holds a hash sign.\n",
             "what?.md": "# what\n\nA page whose name holds a question mark.\n",
             "two words.md": "# two words\n\nA page whose name holds a space.\n",
             "naïve café.md": "# café\n\nA page whose name holds accents.\n"}


def lakehouse_cli(live: Live, *args: str, stdin: str | None = None,
                  tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The `lakehouse` command as a user runs it, its output to pipes (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_URL=live.url, LAKEHOUSE_TOKEN=live.token,
               LAKEHOUSE_CONFIG=str(ROOT / "lakehouse.toml"))
    if tmp is not None:
        env["LAKEHOUSE_STATE_DIR"] = str(tmp / "state")
    return subprocess.run([sys.executable, "-m", "internal.cli.main", *args], cwd=ROOT,
                          env=env, input=stdin if stdin is not None else "",
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def synced(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A corpus synced by `lakehouse sync` from the odd-named pages (its stderr: a pipe)."""
    tmp = tmp_path_factory.mktemp("cli-items")
    wiki = tmp / "wiki"
    shutil.copytree(FIXTURES / "tldr_symbols", wiki, ignore=shutil.ignore_patterns("README"))
    for name, text in OWN_PAGES.items():
        (wiki / name).write_text(text, encoding="utf-8")
    corpus = f"cli_{uuid.uuid4().hex[:10]}"
    done = lakehouse_cli(live, "sync", str(wiki), "--corpus", corpus, tmp=tmp)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("added 8,"), done.stdout
    # Progress to a pipe: whole lines (no carriage-return frames), the last one complete.
    assert "\r" not in done.stderr, repr(done.stderr[:300])
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith(f"sync {corpus}: ")]
    assert lines and re.match(rf"sync {corpus}: 8/8 chunk \(100%\) in \d+s", lines[-1]), \
        done.stderr
    yield corpus
    with lakehouse.Client(live.url, live.token) as client:
        if corpus in {c.name for c in client.list_corpora()}:
            client.delete_corpus(corpus)


def test_items_list_get_and_iter_items_agree(live: Live, client: lakehouse.Client,
                                            synced: str) -> None:
    listed = lakehouse_cli(live, "items", "list", synced)
    assert listed.returncode == 0, listed.stderr
    ids = listed.stdout.splitlines()
    expected = {"{.md#0", "}.md#0", "%.md#0", "$.md#0", *(f"{n}#0" for n in OWN_PAGES)}
    assert set(ids) == expected and len(ids) == len(expected)
    assert [r.id for r in client.iter_ids(synced)] == ids
    assert [it.id for it in client.iter_items(synced)] == ids  # every listed id reads back
    rows = [json.loads(line) for line in
            lakehouse_cli(live, "items", "list", synced, "--prefix", "{", "--json").stdout.splitlines()]
    assert [r["id"] for r in rows] == ["{.md#0"] and len(rows[0]["content_hash"]) == 64
    for item_id in ids:
        got = lakehouse_cli(live, "items", "get", synced, item_id)
        assert got.returncode == 0, (item_id, got.stderr)
        assert got.stdout.startswith(f"id: {item_id}\ncorpus: {synced}\n"), got.stdout
    shown = json.loads(lakehouse_cli(live, "items", "get", synced, "{.md#0", "--json").stdout)
    assert shown["id"] == "{.md#0" and "Multipurpose shell syntax" in shown["text"]
    assert "vector" not in shown
    missing = lakehouse_cli(live, "items", "get", synced, "{nope}")
    assert missing.returncode == 1 and "item '{nope}' not found" in missing.stderr


def test_items_delete(live: Live, client: lakehouse.Client, synced: str) -> None:
    done = lakehouse_cli(live, "items", "delete", synced, "{.md#0", "what?.md#0", "nope")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"deleted 2 of 3 items from {synced!r} (1 not there)"
    from_stdin = lakehouse_cli(live, "items", "delete", synced, "-", stdin="}.md#0\n%.md#0\n")
    assert from_stdin.stdout.strip() == f"deleted 2 of 2 items from {synced!r}"
    left = {r.id for r in client.iter_ids(synced)}
    assert not left & {"{.md#0", "}.md#0", "%.md#0", "what?.md#0"} and "$.md#0" in left


def test_corpora_delete_asks_first(live: Live, client: lakehouse.Client, synced: str) -> None:
    count = client.get_corpus(synced).count
    for answer in ("n\n", "", "maybe\n"):  # no, no answer (end of input), not a yes
        kept = lakehouse_cli(live, "corpora", "delete", synced, stdin=answer)
        assert kept.returncode == 1, kept.stdout
        assert f"delete corpus {synced!r} and its {count} items? [y/N]" in kept.stderr
        assert "not deleted" in kept.stderr and client.get_corpus(synced).count == count
    gone = lakehouse_cli(live, "corpora", "delete", synced, stdin="y\n")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.strip() == f"deleted corpus {synced!r} ({count} items)"
    with pytest.raises(lakehouse.NotFound):
        client.get_corpus(synced)


def test_ingest_progress_to_a_pipe_then_delete_without_asking(live: Live, client: lakehouse.Client,
                                                              tmp_path: Path) -> None:
    corpus = f"cli_{uuid.uuid4().hex[:10]}"
    done = lakehouse_cli(live, "ingest", str(EXAMPLES / "handbook.jsonl"), "--corpus", corpus,
                         tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr, repr(done.stderr[:300])
    total = client.get_corpus(corpus).count
    assert re.search(rf"^{corpus}: {total}/{total} doc \(100%\) in \d+s", done.stderr, re.M), \
        done.stderr
    gone = lakehouse_cli(live, "corpora", "delete", corpus, "--yes")
    assert gone.returncode == 0 and gone.stdout.strip() == \
        f"deleted corpus {corpus!r} ({total} items)"
    assert not gone.stderr  # nothing asked
    assert corpus not in {c.name for c in client.list_corpora()}
