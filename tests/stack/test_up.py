"""`lakehouse up` as a user runs it: the real daemons as processes, JSON logs in files.

One stack serves every test in this module (start-up loads the model); the last test
stops it with SIGTERM and checks that nothing of it is left running.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from internal.stack.postgres import postmaster_pid
from tests.helpers import ROOT
from tests.stack.ports import free_port


@dataclass
class Stack:
    proc: subprocess.Popen[str]
    url: str
    tmp: Path
    shown: list[str]  # what `lakehouse up` printed up to "Lakehouse is up"

    @property
    def logs(self) -> Path:
        return self.tmp / "logs"

    def daemon_pid(self, name: str) -> int:
        for child in psutil.Process(self.proc.pid).children():
            if f"internal.{name}.server" in " ".join(child.cmdline()):
                return child.pid
        raise AssertionError(f"no {name} process under lakehouse up")


def call(url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json",
                                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-up-test-"))
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(tmp / "pg"), "LAKEHOUSE_LOG_FORMAT": "json",
           "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml")}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN", "LAKEHOUSE_URL"):
        env.pop(name, None)
    env.pop("LAKEHOUSE_TOKEN", None)
    for section in ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC", "MCPD"):
        env[f"LAKEHOUSE_{section}_PORT"] = str(free_port())
    proc = subprocess.Popen(
        [sys.executable, "-m", "internal.cli.main", "up", "--log-dir", str(tmp / "logs"), "--timeout", "400"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=(tmp / "up.log").open("w"), text=True)
    assert proc.stdout is not None
    url = ""
    shown: list[str] = []
    for line in proc.stdout:
        shown.append(line.rstrip("\n"))
        if line.startswith("Lakehouse is up: "):
            url = line.split(": ", 1)[1].strip()
            break
    if not url:
        proc.kill()
        pytest.fail(f"lakehouse up never got ready:\n{(tmp / 'up.log').read_text()[-3000:]}")
    yield Stack(proc, url, tmp, shown)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    shutil.rmtree(tmp, ignore_errors=True)


def test_one_request_id_in_every_daemon_log(stack: Stack) -> None:
    corpus = f"stack_{uuid.uuid4().hex[:8]}"
    status, emb = call(f"{stack.url}/v1/embed", {"texts": ["pgvector stores vectors", "tea is a drink"]})
    assert status == 200
    status, _ = call(f"{stack.url}/v1/vectors/corpora", {"name": corpus, "dim": emb["dim"], "model": emb["model"]})
    assert status == 201
    items = [{"id": f"d{i}", "vector": v, "text": t}
             for i, (v, t) in enumerate(zip(emb["vectors"], ["pgvector stores vectors", "tea is a drink"], strict=True))]
    status, _ = call(f"{stack.url}/v1/vectors/corpora/{corpus}/items", {"items": items, "model": emb["model"]})
    assert status == 200

    rid = f"stacktest-{uuid.uuid4().hex}"
    status, out = call(f"{stack.url}/v1/matrix/search",
                       {"query_text": "where are vectors stored", "corpora": [corpus], "k": 2},
                       headers={"X-Request-ID": rid})
    assert status == 200, out
    assert out["hits"][0]["id"] == "d0"
    assert out["hits"][0]["corpus"] == corpus
    missing: list[str] = []
    for _ in range(50):
        missing = [d for d in ("gateway", "matrixd", "embedd", "vectord")
                   if not any(json.loads(line).get("request_id") == rid
                              for line in (stack.logs / f"{d}.log").read_text().splitlines()
                              if line.startswith("{"))]
        if not missing:
            break
        time.sleep(0.1)
    assert missing == []


def test_up_shows_each_part_as_it_comes_up_and_no_request_logs(stack: Stack) -> None:
    """The terminal: PostgreSQL, one line per daemon ready, then "Lakehouse is up"; the
    daemons' request logs are in their files only (stderr holds warnings and errors)."""
    assert stack.shown[0].startswith("starting PostgreSQL in ")
    ready = {line.split()[0] for line in stack.shown[1:-1] if line.endswith(")")}
    assert ready == {"embedd", "vectord", "matrixd", "syncd", "mcpd", "gateway"}, stack.shown
    assert stack.shown[-1] == f"Lakehouse is up: {stack.url}"
    call(f"{stack.url}/v1/vectors/corpora")
    assert '"request"' not in (stack.tmp / "up.log").read_text()
    assert '"request"' in (stack.logs / "gateway.log").read_text()


def test_every_component_ready_through_gateway(stack: Stack) -> None:
    status, body = call(f"{stack.url}/readyz")
    assert status == 200, body
    assert {k: v["status"] for k, v in body["components"].items()} == {
        "embedd": "ok", "vectord": "ok", "matrixd": "ok", "syncd": "ok", "mcpd": "ok", "postgres": "ok"}
    out = subprocess.run([sys.executable, "-m", "internal.cli.main", "status", "--url", stack.url],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "postgres" in out.stdout and out.stdout.strip().endswith("ready")


def test_killed_daemon_503_then_restarted(stack: Stack) -> None:
    pid = stack.daemon_pid("matrixd")
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).wait(10)
    status, body = call(f"{stack.url}/v1/matrix/corpora")
    assert status == 503
    assert body["error"]["code"] == "matrixd_unavailable"
    assert "matrixd" in body["error"]["message"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, body = call(f"{stack.url}/v1/matrix/corpora")
        if status == 200:
            break
        time.sleep(0.2)
    assert status == 200, body
    assert stack.daemon_pid("matrixd") != pid
    assert '"daemon_restarted"' in (stack.tmp / "up.log").read_text()


def _task(url: str, task_id: int) -> dict[str, Any]:
    status, body = call(f"{url}/v1/tasks/{task_id}")
    assert status == 200, body
    return dict(body)


def test_a_document_task_survives_its_vectord_killed(stack: Stack) -> None:
    """Acknowledged (202) means persisted: vectord killed while the task runs, the
    supervisor restarts it, and the task resumes after what it had done and ends with
    every document in."""
    corpus = f"tasks_{uuid.uuid4().hex[:8]}"
    docs = [{"id": f"page-{i}", "text": f"# Page {i}\n\nNotes on ferry number {i}, its pier "
             f"and its timetable.\n\n## Crew\n\nThe crew of ferry {i}."} for i in range(600)]
    status, task = call(f"{stack.url}/v1/corpora/{corpus}/documents", {"documents": docs})
    assert status == 202 and task["state"] in ("enqueued", "processing"), task
    deadline = time.monotonic() + 120
    while _task(stack.url, task["id"])["counts"]["added"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = stack.daemon_pid("vectord")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 300
    done: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(urllib.error.URLError, ValueError):
            status, body = call(f"{stack.url}/v1/tasks/{task['id']}")
            if status == 200 and body["state"] in ("succeeded", "failed"):
                done = body
                break
        time.sleep(0.2)
    assert done.get("state") == "succeeded", done
    assert stack.daemon_pid("vectord") != pid
    assert done["counts"]["added"] + done["counts"]["unchanged"] == 600
    status, info = call(f"{stack.url}/v1/vectors/corpora/{corpus}")
    assert (info["documents"], info["count"]) == (600, 1200)


def test_sigterm_leaves_no_process_behind(stack: Stack) -> None:
    up = psutil.Process(stack.proc.pid)
    family = {p.pid for p in up.children(recursive=True)}
    assert len(family) >= 6
    pg = postmaster_pid(stack.tmp / "pg")
    assert pg is not None
    family.add(pg)
    stack.proc.send_signal(signal.SIGTERM)
    assert stack.proc.wait(120) == 0

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in family):
        time.sleep(0.1)
    assert [p for p in family if running(p)] == []
    leftovers = [p.pid for p in psutil.process_iter(["cmdline"])
                 if str(stack.tmp) in " ".join(p.info["cmdline"] or []) and running(p.pid)]
    assert leftovers == []
