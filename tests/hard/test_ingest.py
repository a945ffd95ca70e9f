"""`lakehouse ingest` on real data: Cranfield goes in whole, with the right counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hard.conftest import TOKEN, HardStack
from tests.helpers import ROOT, require_shared


def ingest(stack: HardStack, path: Path, corpus: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKEHOUSE_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "internal.cli.main", "ingest", str(path), "--corpus", corpus,
         "--url", stack.gateway, "--quiet", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def test_cranfield_ingests_with_right_counts(hard_stack: HardStack) -> None:
    path = require_shared("data", "cranfield", "corpus.jsonl")
    out = ingest(hard_stack, path, "cranfield", "--concurrency", "3", "--batch", "32")
    assert out.returncode == 0, out.stderr[-3000:]
    assert ("cranfield: 1400 documents: 1398 upserted, 0 unchanged, 2 skipped (no text), "
            "0 failed; 1398 items in corpus") in out.stdout, out.stdout + out.stderr[-2000:]
    assert "skipped 2 documents with no title and no text: 471, 995" in out.stderr
    assert "retrying" not in out.stderr
    assert hard_stack.count("cranfield") == 1398
    again = ingest(hard_stack, path, "cranfield", "--concurrency", "3")
    assert again.returncode == 0, again.stderr[-3000:]
    assert ("cranfield: 1400 documents: 0 upserted, 1398 unchanged, 2 skipped (no text), "
            "0 failed; 1398 items in corpus") in again.stdout


def test_bad_documents_are_reported_and_the_rest_goes_in(hard_stack: HardStack,
                                                          tmp_path: Path) -> None:
    docs = [
        {"_id": "ok1", "title": "Wings", "text": "lift at high angles of attack"},
        {"_id": "nul", "title": "Bad", "text": "a NUL \u0000 inside"},
        {"_id": "x" * 600, "text": "an id longer than 512 bytes"},
        {"_id": "empty", "title": "", "text": "   "},
        {"_id": "ok2", "text": "boundary layer transition"},
        {"_id": "ok3", "text": "supersonic flow over a cone"},
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    out = ingest(hard_stack, path, "hard_ingest", "--concurrency", "2", "--batch", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("hard_ingest: 6 documents: 3 upserted, 0 unchanged, 1 skipped (no text), "
            "2 failed; 3 items in corpus") in out.stdout, out.stdout + out.stderr
    assert "failed: document 'nul': HTTP 400 invalid_argument (texts[" in out.stderr
    assert f"failed: document '{'x' * 600}': HTTP 400 invalid_argument (items[" in out.stderr
    assert "skipped 1 documents with no title and no text: empty" in out.stderr


def test_a_stopped_run_says_why(hard_stack: HardStack, tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text('{"_id": "a", "text": "x"}\n', encoding="utf-8")
    env = {**os.environ, "LAKEHOUSE_TOKEN": "wrong-token"}
    out = subprocess.run(
        [sys.executable, "-m", "internal.cli.main", "ingest", str(path), "--corpus", "hard_x",
         "--url", hard_stack.gateway, "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "HTTP 401 unauthorized" in out.stderr
    assert "retrying" not in out.stderr
