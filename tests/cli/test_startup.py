"""The command starts fast because it loads only what the command runs: `lakehouse --help`
loads neither the HTTP stack nor any server module, and `lakehouse corpora` (against a
small local server playing the gateway) loads the client and nothing of the server's
dependencies. Checked on the modules a fresh interpreter has loaded, not on timings
(bench/suite/cli_start.py measures those)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from tests.helpers import ROOT, serve, url_of

# What made the command take 1-1.6 s: the server's dependencies and modules.
SERVER_SIDE = ("numpy", "structlog", "tqdm", "psycopg", "spacy", "onnxruntime", "mcp",
               "yaml", "internal.config", "internal.ingest", "internal.clients",
               "internal.common.web", "internal.common.logs", "internal.syncd",
               "internal.evaluation.runner", "internal.stack", "internal.gateway")
HTTP_STACK = ("aiohttp", "msgspec")

_RUN = """
import atexit, json, sys
watched = json.loads(sys.argv[1])
atexit.register(lambda: print("LOADED " + json.dumps(sorted(m for m in watched
                                                            if m in sys.modules))))
from internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def loaded(state: Path, *argv: str) -> tuple[list[str], str]:
    """The watched modules the command loaded, and what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["LAKEHOUSE_STATE_DIR"] = str(state)  # the commands' read-your-writes file
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(SERVER_SIDE + HTTP_STACK),
                           *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out, _, found = done.stdout.rpartition("LOADED ")
    return json.loads(found), out


def test_help_loads_no_http_stack_and_no_server_module(tmp_path: Path) -> None:
    modules, out = loaded(tmp_path, "--help")
    assert "corpora" in out and modules == []


async def test_corpora_loads_the_client_only(tmp_path: Path) -> None:
    async def corpora(request: web.Request) -> web.Response:
        return web.json_response({"corpora": [{
            "name": "handbook", "dim": 384, "metric": "cosine", "language": "english",
            "model": "minilm", "count": 12, "created_at": "2026-10-01T00:00:00Z",
            "precision": "float16"}]})

    app = web.Application()
    app.router.add_get("/v1/vectors/corpora", corpora)
    server = await serve(app)
    try:
        modules, out = await asyncio.to_thread(loaded, tmp_path, "corpora", "--url",
                                              url_of(server))
    finally:
        await server.close()
    assert "handbook" in out and "12" in out
    assert modules == sorted(HTTP_STACK)
