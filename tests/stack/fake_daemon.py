"""A stand-in daemon process for supervisor tests: serves /readyz on $FAKE_PORT; with
$FAKE_HANG_ON_STOP its cleanup never ends (a daemon that hangs on SIGTERM), and it logs
its stacks on SIGUSR1 as the real daemons do. With $FAKE_CONFIG_ERROR it stops at once
as a daemon does on its configuration; $FAKE_COMPONENTS makes its /readyz a gateway's. With $FAKE_WARN it logs, as the daemons
do, an info line, a warning (structlog's JSON) and a stdlib logging warning."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from aiohttp import web

from internal.common import stackdump
from internal.common.daemon import EXIT_CONFIG


async def _hang(_: web.Application) -> None:
    await asyncio.Event().wait()


async def readyz(_: web.Request) -> web.Response:
    """ok; with $FAKE_COMPONENTS (JSON), the gateway's answer over those components."""
    parts = json.loads(os.environ.get("FAKE_COMPONENTS", "{}"))
    ok = all(p.get("status") == "ok" for p in parts.values())
    return web.json_response({"status": "ok" if ok else "degraded", "components": parts},
                             status=200 if ok else 503)


if __name__ == "__main__":
    if os.environ.get("FAKE_CONFIG_ERROR"):  # as a real daemon stops on its configuration
        print(f"config error: {os.environ['FAKE_CONFIG_ERROR']}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_CONFIG)
    print(f"fake_daemon_started port={os.environ['FAKE_PORT']}", flush=True)
    if os.environ.get("FAKE_WARN"):
        print('{"event":"request","status":200,"level":"info"}', flush=True)
        print('{"fallback":"a scan","event":"fake_degraded","service":"fake","level":"warning",'
              '"timestamp":"2026-01-01T00:00:00Z"}', flush=True)
        print("WARNING:fake.lib:a library's own warning", flush=True)
    app = web.Application()
    app.router.add_get("/readyz", readyz)
    app.on_startup.append(stackdump.install)
    if os.environ.get("FAKE_HANG_ON_STOP"):
        app.on_cleanup.append(_hang)
    web.run_app(app, host="127.0.0.1", port=int(os.environ["FAKE_PORT"]), print=None)
