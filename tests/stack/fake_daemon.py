"""A stand-in daemon process for supervisor tests: serves /readyz on $FAKE_PORT."""

from __future__ import annotations

import os

from aiohttp import web


async def readyz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "components": {}})


if __name__ == "__main__":
    print(f"fake_daemon_started port={os.environ['FAKE_PORT']}", flush=True)
    app = web.Application()
    app.router.add_get("/readyz", readyz)
    web.run_app(app, host="127.0.0.1", port=int(os.environ["FAKE_PORT"]), print=None)
