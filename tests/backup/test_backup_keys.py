"""API keys survive `lakehouse backup` and `lakehouse restore`.

A stack with auth on gets two keys, one of them revoked, and a backup is taken; its data
directory is wiped and the backup restored: the kept key opens what it opened (and still
only that), the revoked one stays refused, tenant tokens signed with the kept key work,
and the key list is the one backed up.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import lakehouse
from tests.backup.test_backup import cli
from tests.stack import upstack

A, B = "kept_a", "kept_b"


def _call(url: str, token: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _names(url: str, token: str) -> tuple[int, list[str]]:
    status, out = _call(f"{url}/v1/vectors/corpora", token)
    return status, [c["name"] for c in out.get("corpora", [])] if status == 200 else []


def test_keys_survive_backup_and_restore(tmp_path: Path) -> None:
    admin = f"t-{uuid.uuid4().hex}"
    env = {"LAKEHOUSE_TOKEN": admin}
    stack = upstack.start("lakehouse-backup-keys-", env)
    pg = stack.tmp / "pg"
    try:
        for name in (A, B):
            status, out = _call(f"{stack.url}/v1/vectors/corpora", admin, "POST",
                                {"name": name, "dim": 4})
            assert status == 201, out
            status, out = _call(f"{stack.url}/v1/vectors/corpora/{name}/items", admin, "POST", {
                "items": [{"id": "x", "vector": [1, 0, 0, 0], "text": f"tea of {name}",
                           "metadata": {"tenant": "t1"}}]})
            assert status == 200, out
        status, kept = _call(f"{stack.url}/v1/keys", admin, "POST",
                             {"name": "kept", "actions": ["read", "search"], "corpora": [A]})
        assert status == 201, kept
        status, gone = _call(f"{stack.url}/v1/keys", admin, "POST",
                             {"name": "gone", "actions": ["read"], "corpora": ["*"]})
        assert status == 201, gone
        assert _call(f"{stack.url}/v1/keys/{gone['id']}", admin, "DELETE")[0] == 200
        _, listed = _call(f"{stack.url}/v1/keys", admin)
        taken = cli(pg, "backup", str(tmp_path / "full"))
        assert taken.returncode == 0, taken.stderr
    finally:
        stack.stop()

    shutil.rmtree(pg)
    restored = cli(pg, "restore", str(tmp_path / "full"))
    assert restored.returncode == 0, restored.stderr
    again = upstack.start("lakehouse-backup-keys-restored-",
                          {**env, "LAKEHOUSE_VECTORD_DATA_DIR": str(pg)})
    try:
        assert _names(again.url, kept["key"]) == (200, [A])  # its scope, as backed up
        assert _names(again.url, gone["key"])[0] == 401  # still revoked
        token = lakehouse.tenant_token(kept["key"], kept["id"], filter={"metadata": {"tenant": "t1"}})
        status, out = _call(f"{again.url}/v1/vectors/search", token, "POST",
                            {"query_text": "tea", "mode": "lexical"})
        assert status == 200 and {h["corpus"] for h in out["hits"]} == {A}, out
        status, after = _call(f"{again.url}/v1/keys", admin)
        assert status == 200
        strip = ("last_used_at",)  # the uses above set it again
        assert [{k: v for k, v in key.items() if k not in strip} for key in after["keys"]] == \
            [{k: v for k, v in key.items() if k not in strip} for key in listed["keys"]]
    finally:
        again.stop()
        shutil.rmtree(stack.tmp, ignore_errors=True)
        shutil.rmtree(again.tmp, ignore_errors=True)
