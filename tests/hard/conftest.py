"""One `lakehouse up` with auth on for every test of this package.

The stack runs as a user runs it (processes, a client token in LAKEHOUSE_TOKEN), so the
tests see what a client sees: the gateway and each daemon's own port.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from tests.stack.ports import free_port

TOKEN = "hard-test-token"
SECTIONS = {"gateway": "GATEWAY", "embedd": "EMBEDD", "vectord": "VECTORD",
            "matrixd": "MATRIXD", "syncd": "SYNC"}


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class HardStack:
    proc: subprocess.Popen[str]
    tmp: Path
    urls: dict[str, str]  # daemon -> base URL, "gateway" included

    @property
    def gateway(self) -> str:
        return self.urls["gateway"]

    def call(self, method: str, url: str, body: Any = None, *, raw: bytes | None = None,
             token: str | None = TOKEN, headers: dict[str, str] | None = None) -> Answer:
        """One HTTP call; the body is JSON-encoded unless raw bytes are given."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=300) as resp:
                payload = resp.read()
                status, hdr = resp.status, dict(resp.headers.items())
        except urllib.error.HTTPError as exc:
            payload, status, hdr = exc.read(), exc.code, dict(exc.headers.items())
        try:
            parsed: Any = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload.decode("utf-8", "replace")
        return Answer(status, parsed, hdr)

    def count(self, corpus: str) -> int:
        out = self.call("GET", f"{self.urls['vectord']}/v1/vectors/corpora/{corpus}")
        assert out.status == 200, out.body
        return int(out.body["count"])

    def newest_task(self) -> int | None:
        """The id of the newest task (None: none yet): unchanged by a refused request."""
        out = self.call("GET", f"{self.urls['vectord']}/v1/tasks?limit=1")
        assert out.status == 200, out.body
        return out.body["tasks"][0]["id"] if out.body["tasks"] else None

    def settle(self, answer: Answer) -> None:
        """A 202's task waited for, so the next request's checks see a quiet corpus."""
        body = answer.body
        if answer.status == 202 and isinstance(body, dict) and isinstance(body.get("id"), int):
            while True:
                out = self.call("GET", f"{self.urls['vectord']}/v1/tasks/{body['id']}?wait=true")
                if out.status != 200 or out.body["state"] in ("succeeded", "failed"):
                    return


@pytest.fixture(scope="package")
def hard_stack() -> Iterator[HardStack]:
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-hard-test-"))
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(tmp / "pg"),
           "LAKEHOUSE_LOG_FORMAT": "json", "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"),
           "LAKEHOUSE_TOKEN": TOKEN}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN", "LAKEHOUSE_URL",
                 "LAKEHOUSE_GATEWAY_SERVICE_TOKEN"):
        env.pop(name, None)
    urls: dict[str, str] = {}
    for daemon, section in SECTIONS.items():
        port = free_port()
        env[f"LAKEHOUSE_{section}_PORT"] = str(port)
        urls[daemon] = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "internal.cli.main", "up", "--log-dir", str(tmp / "logs"),
         "--timeout", "400"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=(tmp / "up.log").open("w"), text=True)
    assert proc.stdout is not None
    ready = False
    for line in proc.stdout:
        if line.startswith("Lakehouse is up: "):
            ready = True
            break
    if not ready:
        proc.kill()
        pytest.fail(f"lakehouse up never got ready:\n{(tmp / 'up.log').read_text()[-3000:]}")
    yield HardStack(proc, tmp, urls)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="package")
def corpus(hard_stack: HardStack) -> str:
    """A corpus of three embedded items that the bad inputs must leave as it is."""
    name = "hard_c"
    texts = ["pgvector stores vectors in PostgreSQL", "tea is a drink", "the wing in a slipstream"]
    emb = hard_stack.call("POST", f"{hard_stack.gateway}/v1/embed", {"texts": texts})
    assert emb.status == 200, emb.body
    made = hard_stack.call("POST", f"{hard_stack.gateway}/v1/vectors/corpora",
                           {"name": name, "dim": emb.body["dim"], "model": emb.body["model"]})
    assert made.status == 201, made.body
    items = [{"id": f"d{i}", "vector": v, "text": t, "metadata": {"type": "note"}}
             for i, (v, t) in enumerate(zip(emb.body["vectors"], texts, strict=True))]
    up = hard_stack.call("POST", f"{hard_stack.gateway}/v1/vectors/corpora/{name}/items",
                         {"items": items, "model": emb.body["model"]})
    assert up.status == 200, up.body
    return name
