"""`lakehouse ingest` on real data: Cranfield goes in whole, through the stack's document
pipeline, with the right counts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
from aiohttp import web

from tests.hard.conftest import TOKEN, HardStack
from tests.helpers import ROOT, require_shared, serve, url_of


def ingest(stack: HardStack, path: Path, corpus: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKEHOUSE_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "internal.cli.main", "ingest", str(path), "--corpus", corpus,
         "--url", stack.gateway, "--quiet", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def test_cranfield_ingests_with_right_counts(hard_stack: HardStack) -> None:
    path = require_shared("data", "cranfield", "corpus.jsonl")
    out = ingest(hard_stack, path, "cranfield", "--batch", "300")
    assert out.returncode == 0, out.stderr[-3000:]
    m = re.search(r"cranfield: 1400 documents: 1398 written \((\d+) chunks\), 0 unchanged, "
                  r"2 skipped \(no text\), 0 failed; 1398 documents, (\d+) items in corpus",
                  out.stdout)
    assert m is not None, out.stdout + out.stderr[-2000:]
    # A chunk per section: the few abstracts over 2,000 characters are cut in two or more.
    chunks = int(m.group(1))
    assert int(m.group(2)) == chunks and 1398 < chunks < 1500
    assert "skipped 2 documents with no title and no text: 471, 995" in out.stderr
    assert "retrying" not in out.stderr
    assert hard_stack.count("cranfield") == chunks
    again = ingest(hard_stack, path, "cranfield")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"cranfield: 1400 documents: 0 written (0 chunks), 1398 unchanged, 2 skipped "
            f"(no text), 0 failed; 1398 documents, {chunks} items in corpus") in again.stdout


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
    out = ingest(hard_stack, path, "hard_ingest", "--batch", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("hard_ingest: 6 documents: 3 written (3 chunks), 0 unchanged, 1 skipped (no text), "
            "2 failed; 3 documents, 3 items in corpus") in out.stdout, out.stdout + out.stderr
    assert "failed: document 'nul': HTTP 400 invalid_argument (documents[" in out.stderr
    assert f"failed: document '{'x' * 600}': HTTP 400 invalid_argument (documents[" in out.stderr
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


def _every_other_429(target: str) -> tuple[web.Application, list[int]]:
    """A proxy in front of the gateway that answers every other request of each route
    (method and path) 429 rate_limited (Retry-After: 1) and passes the rest on; the list
    counts its 429s. Per route, so that a step of several calls (make the corpus: look,
    read the model, create) is not refused on the same call every time it is tried."""
    seen: dict[str, int] = {}
    limited: list[int] = []

    async def relay(request: web.Request) -> web.Response:
        route = f"{request.method} {request.path}"
        seen[route] = seen.get(route, 0) + 1
        if seen[route] % 2 == 0:
            limited.append(len(limited) + 1)
            body = {"error": {"code": "rate_limited", "message": "past this client's share"},
                    "request_id": f"proxy-{len(limited)}"}
            return web.json_response(body, status=429, headers={"Retry-After": "1"})
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("authorization", "content-type", "lakehouse-lsn")}
        async with aiohttp.ClientSession() as s, s.request(
                request.method, f"{target}{request.rel_url}", data=await request.read(),
                headers=headers) as r:
            out = {k: v for k, v in r.headers.items()
                   if k.lower() in ("content-type", "lakehouse-lsn", "x-request-id")}
            return web.Response(status=r.status, body=await r.read(), headers=out)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", relay)
    return app, limited


async def test_ingest_finishes_when_half_the_answers_are_429(hard_stack: HardStack,
                                                             tmp_path: Path) -> None:
    """Every document goes in exactly once, with the right counts: the 429s (of its tasks'
    writes and of the looks at them) are waited out."""
    docs = [{"_id": f"r{i}", "title": f"Note {i}", "text": f"rate limited note number {i}"}
            for i in range(48)]
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    app, limited = _every_other_429(hard_stack.gateway)
    proxy = await serve(app)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "internal.cli.main", "ingest", str(path), "--corpus",
            "hard_429", "--url", url_of(proxy), "--batch", "8",
            cwd=ROOT, env={**os.environ, "LAKEHOUSE_TOKEN": TOKEN},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 600)
    finally:
        await proxy.close()
    stdout, stderr = out.decode(), err.decode().replace("\r", "\n")
    assert proc.returncode == 0, stdout + stderr[-3000:]
    assert ("hard_429: 48 documents: 48 written (48 chunks), 0 unchanged, 0 skipped (no text), "
            "0 failed; 48 documents, 48 items in corpus") in stdout, stdout + stderr[-3000:]
    assert len(limited) >= 6  # half of the calls of each route

    assert hard_stack.count("hard_429") == 48
    listed = hard_stack.call("GET", f"{hard_stack.gateway}/v1/vectors/corpora/hard_429/ids")
    assert sorted(row["id"] for row in listed.body["items"]) == sorted(
        f"{d['_id']}#0" for d in docs)
