"""Refusals that say what is missing, on the shared stack (tests/agents/conftest.py).

A 403 names what the route does, the action it needs and the actions the key has; a 401
says why the credential opens nothing (no more than its holder may know); a corpus
outside the key answers as one that does not exist for every route, writes and deletes
included. `lakehouse ingest` with a write key works on its own, and says what is missing
with a search key or into a corpus it may not create.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.agents.conftest import Live, call
from tests.agents.test_keys import A, B, Keys, keys  # noqa: F401 (keys: a fixture)
from tests.helpers import ROOT


def _error(live: Live, path: str, body: object, header: str, method: str | None = None
           ) -> tuple[int, str]:
    status, out = call(f"{live.url}{path}", body, {"Authorization": header} if header else {},
                       method=method)
    return status, out["error"]["message"] if status >= 400 else ""


def test_a_403_names_the_action_the_route_needs(live: Live, keys: Keys) -> None:  # noqa: F811
    search = keys.secrets["search"]
    item = {"items": [{"id": "x", "text": "t", "vector": [0.1] * 384}]}
    assert _error(live, f"/v1/vectors/corpora/{A}/items", item, search) == (
        403, "writing items needs the write action; this key has: search")
    assert _error(live, "/v1/vectors/corpora", {"name": "keys_new", "dim": 4},
                  keys.secrets["write"]) == (
        403, "creating a corpus needs the admin action; this key has: write")
    assert _error(live, f"/v1/vectors/corpora/{A}/ids", None, search) == (
        403, "listing a corpus's ids needs the read or write action; this key has: search")


def test_a_401_says_why(live: Live, keys: Keys) -> None:  # noqa: F811
    path = "/v1/vectors/corpora"
    assert _error(live, path, None, keys.secrets["expired"]) == (401, "key expired")
    assert _error(live, path, None, keys.secrets["revoked"]) == (401, "key revoked")
    assert _error(live, path, None, keys.secrets["wrong"]) == (401, "unknown key")
    assert _error(live, path, None, "") == (
        401, "missing bearer token (Authorization: Bearer <token>)")
    status, message = _error(live, path, None, "Bearer not-a-token")
    assert status == 401 and message.startswith("unknown token"), message


def test_writes_and_deletes_outside_the_key_answer_as_a_missing_corpus(
        live: Live, keys: Keys) -> None:  # noqa: F811
    for cred in ("read", "search", "write", "feedback"):  # with or without `write`
        header = keys.secrets[cred]
        # What this key is told of a corpus that does not exist, as close to its own name.
        _, missing = _error(live, "/v1/vectors/corpora/keys_c/items/delete", {"ids": ["x"]},
                            header)
        expected = (404, missing.replace("keys_c", B))
        assert expected[1] == f"corpus {B!r} not found (did you mean {A!r}?)"
        assert _error(live, f"/v1/vectors/corpora/{B}/items/delete", {"ids": ["x"]},
                      header) == expected, cred
        assert _error(live, f"/v1/vectors/corpora/{B}/items",
                      {"items": [{"id": "x", "text": "t", "vector": [0.1] * 384}]},
                      header) == expected, cred
        assert _error(live, f"/v1/vectors/corpora/{B}", None, header, "DELETE") == expected


def _ingest(live: Live, header: str, corpus: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    lines = tmp / "docs.jsonl"
    lines.write_text('{"_id": "cli-1", "title": "Tea", "text": "Green tea at 80 degrees."}\n'
                     '{"_id": "cli-2", "text": "Espresso at nine bars."}\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_URL=live.url, LAKEHOUSE_TOKEN=header.removeprefix("Bearer "),
               LAKEHOUSE_CONFIG=str(ROOT / "lakehouse.toml"),
               LAKEHOUSE_STATE_DIR=str(tmp / "state"))
    return subprocess.run([sys.executable, "-m", "internal.cli.main", "ingest", str(lines),
                           "--corpus", corpus], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_ingest_needs_write_and_says_so(live: Live, keys: Keys,  # noqa: F811
                                            tmp_path: Path) -> None:
    done = _ingest(live, keys.secrets["write"], A, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{A}: 2 documents: 2 written"), done.stdout
    done = _ingest(live, keys.secrets["search"], A, tmp_path)
    assert done.returncode == 1
    assert "needs the read or write action; this key has: search" in done.stderr, done.stderr
    # A corpus outside the key answers as one that does not exist.
    done = _ingest(live, keys.secrets["write"], "keys_created_by_ingest", tmp_path)
    assert done.returncode == 1
    assert "corpus_not_found" in done.stderr and "keys_created_by_ingest" in done.stderr, \
        done.stderr
