"""What answers on the port of a daemon that stopped on its configuration: every request a
503 `config_error` saying why, `/readyz` too (`{"status": "failed", "error": ...}`), so the
gateway's readiness, `lakehouse status` and the console show the reason where they show
the daemon, while the rest of the stack serves."""

from __future__ import annotations

from aiohttp import web

from internal.common.web import error_response, new_request_id

CODE = "config_error"


async def start(daemon: str, host: str, port: int, reason: str) -> web.AppRunner:
    """Serve the stand-in until the runner is cleaned up."""
    said = f"{daemon} is stopped: {reason}"

    async def readyz(_: web.Request) -> web.Response:
        return web.json_response({"status": "failed", "error": said}, status=503)

    async def refuse(_: web.Request) -> web.Response:
        return error_response(503, CODE, said, new_request_id())

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
