"""One real stack (`lakehouse up`, auth on, a small wiki synced) for the MCP and console tests.

Its answers' model is a fake OpenAI-compatible server in this process that echoes every
passage it is given (tests/answer/chat_fakes.py), so a test sees what a model would read.

Two corpora are loaded through the gateway with the real model: guides and notes about
brewing tea and coffee, so one question finds hits in both; one guide carries markup
(`<script>`, an `onerror` image) that the console must show as text.
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
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.answer.chat_fakes import ChatFake, ChatThread
from tests.helpers import FIXTURES, ROOT
from tests.stack.ports import free_port

GUIDES = "kb_guides"
NOTES = "kb_notes"
SCRIPT_ID = "g_markup"
SCRIPT_TITLE = "<script>window.__pwned = 1</script>Tea markup test"
DOCS: dict[str, list[dict[str, Any]]] = {
    GUIDES: [
        {"id": "g_green_tea", "title": "Brewing green tea",
         "text": "Green tea is brewed with water at 80 degrees Celsius for two minutes; boiling water makes it bitter."},
        {"id": "g_espresso", "title": "Espresso basics",
         "text": "An espresso is brewed by forcing hot water at nine bars of pressure through finely ground coffee."},
        {"id": "g_cold_brew", "title": "Cold brew coffee",
         "text": "Cold brew steeps coarse coffee grounds in cold water for twelve hours, then is filtered."},
        {"id": SCRIPT_ID, "title": SCRIPT_TITLE,
         "text": "<img src=x onerror=\"window.__pwned = 2\"> <script>window.__pwned = 3</script> "
                 "Black tea wants boiling water; green tea wants cooler water around 80 degrees."},
    ],
    NOTES: [
        {"id": "n_tea_notes", "title": "My tea notes",
         "text": "Notes on green tea: steep it in water at about 80 C, never with boiling water, for two or three minutes."},
        {"id": "n_kettle", "title": "Kettle settings",
         "text": "The kettle has temperature presets: 80 degrees for green tea, 100 for black tea and coffee."},
        {"id": "n_e42", "title": "Error E42",
         "text": "Error code E42 on the espresso machine means the water tank is empty."},
    ],
}


@dataclass
class Live:
    url: str
    token: str
    tmp: Path
    proc: subprocess.Popen[str]
    chat: ChatFake  # the answers' model: echoes the passages it is given

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def call(url: str, body: Any = None, headers: dict[str, str] | None = None,
         method: str | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _load(live: Live) -> None:
    for corpus, docs in DOCS.items():
        texts = [f"{d['title']}\n{d['text']}" for d in docs]
        status, emb = call(f"{live.url}/v1/embed", {"texts": texts}, live.auth)
        assert status == 200, emb
        status, out = call(f"{live.url}/v1/vectors/corpora",
                           {"name": corpus, "dim": emb["dim"], "model": emb["model"]}, live.auth)
        assert status == 201, out
        items = [{**d, "vector": v} for d, v in zip(docs, emb["vectors"], strict=True)]
        status, out = call(f"{live.url}/v1/vectors/corpora/{corpus}/items",
                           {"items": items, "model": emb["model"]}, live.auth)
        assert status == 200, out


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-agents-test-"))
    wiki = tmp / "wiki"
    for page in ("7z.md", "bash.md", "base64.md"):
        (wiki / "common").mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "tldr" / "pages" / "common" / page, wiki / "common" / page)
    token = f"t-{uuid.uuid4().hex}"
    chat = ChatFake()
    chat.mode = "echo"
    model = ChatThread(chat).start()
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(tmp / "pg"), "LAKEHOUSE_LOG_FORMAT": "json",
           "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"), "LAKEHOUSE_TOKEN": token,
           "LAKEHOUSE_SYNC_WIKI_DIR": str(wiki), "LAKEHOUSE_SYNC_CORPUS": "wiki",
           "LAKEHOUSE_SYNC_INTERVAL": "3600", "LAKEHOUSE_ANSWER_BACKEND": "openai",
           "LAKEHOUSE_ANSWER_URL": f"{model.url}/v1", "LAKEHOUSE_ANSWER_MODEL": "echo"}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN", "LAKEHOUSE_URL"):
        env.pop(name, None)
    for section in ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC", "MCPD"):
        env[f"LAKEHOUSE_{section}_PORT"] = str(free_port())
    proc = subprocess.Popen(
        [sys.executable, "-m", "internal.cli.main", "up", "--log-dir", str(tmp / "logs"), "--timeout", "400"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=(tmp / "up.log").open("w"), text=True)
    assert proc.stdout is not None
    url = ""
    for line in proc.stdout:
        if line.startswith("Lakehouse is up: "):
            url = line.split(": ", 1)[1].strip()
            break
    if not url:
        proc.kill()
        model.stop()
        pytest.fail(f"lakehouse up never got ready:\n{(tmp / 'up.log').read_text()[-3000:]}")
    stack = Live(url, token, tmp, proc, chat)
    try:
        _load(stack)
        yield stack
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        model.stop()
        shutil.rmtree(tmp, ignore_errors=True)
