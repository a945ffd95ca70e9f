"""The learned ranker's model is kept in PostgreSQL: it survives a restart of the stack and
`lakehouse backup` / `lakehouse restore`, and ranks the same searches after each.

A stack (`lakehouse up`) gets a corpus the ranker learns from and its right answers in a
playbook; `lakehouse ranker train` trains the model and prints its figures. The stack is
stopped and started again on its data directory, then backed up, wiped and restored: each
time `lakehouse ranker status` shows the same current model and a search with feedback
names it and orders its hits the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests import ranker_data
from tests.backup.test_backup import cli
from tests.helpers import ROOT
from tests.stack import upstack

CORPUS, PLAYBOOK = "rk_docs", "rk_feedback"


def _call(url: str, body: Any = None) -> Any:
    req = urllib.request.Request(url, method="POST" if body is not None else "GET",
                                 headers={"Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())


def lakehouse(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LAKEHOUSE_TOKEN", "LAKEHOUSE_URL")}
    return subprocess.run([sys.executable, "-m", "internal.cli.main", *args, "--url", url],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def ranked(url: str) -> tuple[int, list[str]]:
    """The model a search with feedback names, and its hits."""
    out = _call(f"{url}/v1/matrix/search", {
        "query_text": "walrus?", "corpora": [CORPUS], "k": 5, "use_playbook": True,
        "playbook_corpus": PLAYBOOK})
    assert out["ranker"]["applied"], out["ranker"]
    return out["ranker"]["id"], [h["id"] for h in out["hits"]]


def current(url: str) -> list[int]:
    shown = lakehouse(url, "ranker", "status", "--playbook-corpus", PLAYBOOK, "--json")
    assert shown.returncode == 0, shown.stderr
    return [m["id"] for m in json.loads(shown.stdout)["models"] if m["current"]]


def test_a_model_survives_restart_and_restore(tmp_path: Path) -> None:
    stack = upstack.start("lakehouse-ranker-")
    pg = stack.tmp / "pg"
    try:
        rows = ranker_data.docs()
        emb = _call(f"{stack.url}/v1/embed", {"texts": [f"{r['title']}\n{r['text']}" for r in rows]})
        _call(f"{stack.url}/v1/vectors/corpora", {"name": CORPUS, "dim": emb["dim"],
                                                  "model": emb["model"]})
        _call(f"{stack.url}/v1/vectors/corpora/{CORPUS}/items", {"model": emb["model"], "items": [
            {**r, "vector": v} for r, v in zip(rows, emb["vectors"], strict=True)]})
        for q, answer in ranker_data.records():
            _call(f"{stack.url}/v1/matrix/playbooks/record", {
                "query_text": q, "answer_id": answer, "answer_corpus": CORPUS, "score": 1,
                "playbook_corpus": PLAYBOOK})
        trained = lakehouse(stack.url, "ranker", "train", "--playbook-corpus", PLAYBOOK)
        assert trained.returncode == 0, trained.stderr
        assert "trees ranking searches with feedback" in trained.stdout, trained.stdout
        assert "cross-validated nDCG@10 on the records" in trained.stdout
        model = current(stack.url)
        assert len(model) == 1
        before = ranked(stack.url)
        assert before[0] == model[0] and before[1][0] == ranker_data.right_id("walrus")
    finally:
        stack.stop()

    again = upstack.start("lakehouse-ranker-restart-", {"LAKEHOUSE_VECTORD_DATA_DIR": str(pg)})
    try:
        assert current(again.url) == model
        assert ranked(again.url) == before
        taken = cli(pg, "backup", str(tmp_path / "full"))
        assert taken.returncode == 0, taken.stderr
    finally:
        again.stop()

    shutil.rmtree(pg)
    restored = cli(pg, "restore", str(tmp_path / "full"))
    assert restored.returncode == 0, restored.stderr
    back = upstack.start("lakehouse-ranker-restored-", {"LAKEHOUSE_VECTORD_DATA_DIR": str(pg)})
    try:
        assert current(back.url) == model
        assert ranked(back.url) == before
    finally:
        back.stop()
        for s in (stack, again, back):
            shutil.rmtree(s.tmp, ignore_errors=True)
