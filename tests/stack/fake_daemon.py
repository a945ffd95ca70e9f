"""A stand-in daemon process for supervisor tests: serves /readyz on $FAKE_PORT; with
$FAKE_HANG_ON_STOP its cleanup never ends (a daemon that hangs on SIGTERM), and it logs
its stacks on SIGUSR1 as the real daemons do. With $FAKE_WARN it logs, as the daemons
do, an info line, a warning (structlog's JSON) and a stdlib logging warning."""

from __future__ import annotations

import asyncio
import os

from aiohttp import web

from internal.common import stackdump


async def _hang(_: web.Application) -> None:
    await asyncio.Event().wait()


async def readyz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "components": {}})


if __name__ == "__main__":
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
