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
    # A page's id is no item: the page (a document) and its chunks.
    page = lakehouse_cli(live, "items", "get", synced, "hash#tag.md")
    assert page.returncode == 0, page.stderr
    assert "'hash#tag.md' is a document of 1 chunk" in page.stderr
    assert "chunks: hash#tag.md#0\n" in page.stdout and "A page whose name holds a hash" in \
        page.stdout
    # A corpus mistyped: corpus_not_found, with the nearest name.
    typo = lakehouse_cli(live, "items", "list", synced[:-1] + "x")
    assert typo.returncode == 1 and "corpus_not_found" in typo.stderr
    assert f"(did you mean {synced!r}?)" in typo.stderr


def test_items_delete(live: Live, client: lakehouse.Client, synced: str) -> None:
    done = lakehouse_cli(live, "items", "delete", synced, "{.md#0", "what?.md#0", "nope")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == \
        f"deleted 2 items of the 3 ids given from {synced!r} (1 not there)"
    from_stdin = lakehouse_cli(live, "items", "delete", synced, "-", stdin="}.md#0\n%.md#0\n")
    assert from_stdin.stdout.strip() == f"deleted 2 items of the 2 ids given from {synced!r}"
    left = {r.id for r in client.iter_ids(synced)}
    assert not left & {"{.md#0", "}.md#0", "%.md#0", "what?.md#0"} and "$.md#0" in left
    # A page's id (a document's) deletes the page with its chunks.
    page = lakehouse_cli(live, "items", "delete", synced, "two words.md")
    assert page.stdout.strip() == (f"deleted 1 documents (1 chunks) and 0 items of the 1 ids "
                                   f"given from {synced!r}"), page.stdout + page.stderr
    assert "two words.md#0" not in {r.id for r in client.iter_ids(synced)}


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


def test_a_closed_pipe_ends_the_listing_quietly(live: Live, client: lakehouse.Client) -> None:
    """`lakehouse items list C | head -1` over more ids than a pipe holds: no traceback."""
    corpus = f"cli_{uuid.uuid4().hex[:10]}"
    client.create_corpus(corpus, 3, model="toy")
    try:
        items = [lakehouse.Item(id=f"an-item-with-a-longish-id-{n:05d}", text=f"item {n}",
                                vector=[1.0, float(n), 0.5]) for n in range(4000)]
        client.upsert(corpus, items, model="toy")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        env.update(LAKEHOUSE_URL=live.url, LAKEHOUSE_TOKEN=live.token)
        done = subprocess.run(
            f"set -o pipefail; {sys.executable} -m internal.cli.main items list {corpus} "
            "| head -1", shell=True, executable="/bin/bash", cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=300)
        assert done.stdout == "an-item-with-a-longish-id-00000\n"
        assert done.stderr == "" and done.returncode == 141  # as `cat big | head -1`
    finally:
        client.delete_corpus(corpus)


def test_search_output_never_cuts_an_id(live: Live, client: lakehouse.Client) -> None:
    corpus = f"cli_{uuid.uuid4().hex[:10]}"
    long_id = "systemctl-service-log-levels-and-their-meanings"
    client.add_documents(corpus, [{"id": long_id, "text": "journal log levels of a service"}],
                         wait=True)
    try:
        out = lakehouse_cli(live, "search", "journal log levels", "--corpora", corpus)
        assert out.returncode == 0, out.stderr
        assert f" {long_id}#0 " in out.stdout, out.stdout
    finally:
        client.delete_corpus(corpus)


def test_an_unchanged_sync_says_one_line(live: Live, tmp_path: Path) -> None:
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "a.md").write_text("# a\n\nThe a page.\n", encoding="utf-8")
    corpus = f"cli_{uuid.uuid4().hex[:10]}"
    first = lakehouse_cli(live, "sync", str(wiki), "--corpus", corpus, tmp=tmp_path)
    assert first.returncode == 0, first.stderr
    again = lakehouse_cli(live, "sync", str(wiki), "--corpus", corpus, tmp=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("added 0, updated 0, deleted 0, "
                                                             "unchanged 1"), again.stdout
    said = [ln for ln in again.stderr.splitlines() if ln.startswith(f"sync {corpus}:")]
    assert len(said) == 1, again.stderr
    with lakehouse.Client(live.url, live.token) as client:
        client.delete_corpus(corpus)


def test_keys_create_refuses_a_missing_corpus_and_warns_of_a_past_expiry(
        live: Live, client: lakehouse.Client) -> None:
    missing = lakehouse_cli(live, "keys", "create", "k1", "--actions", "search",
                            "--corpora", "handbook,handbok")
    assert missing.returncode == 1
    assert "no corpus 'handbok' (did you mean 'handbook'?)" in missing.stderr
    assert "--allow-missing" in missing.stderr
    made = lakehouse_cli(live, "keys", "create", "k2", "--actions", "search", "--corpora",
                         "not_yet_here", "--allow-missing", "--expires-at",
                         "2001-01-01T00:00:00Z", "--json")
    assert made.returncode == 0, made.stderr
    assert "warning: --expires-at 2001-01-01T00:00:00Z is past: the key opens nothing" in \
        made.stderr
    key = json.loads(made.stdout)
    assert key["corpora"] == ["not_yet_here"]
    client.request("DELETE", f"/v1/keys/{key['id']}")
