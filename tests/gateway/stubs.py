"""Small upstream apps standing in for daemons in proxy tests."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web


def stub_app(name: str, *, postgres_ok: bool = True) -> web.Application:
    """Echoes what it received, so a test can see exactly what the gateway forwarded."""

    async def echo(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        status = int(request.query.get("status", "200"))
        resp = web.Response(status=status, body=body,
                            content_type=request.content_type or "application/octet-stream")
        resp.headers["X-Served-By"] = name
        resp.headers["X-Seen-Request-ID"] = request.headers.get("X-Request-ID", "")
        resp.headers["X-Seen-Auth"] = request.headers.get("Authorization", "")
        resp.headers["X-Seen-Custom"] = request.headers.get("X-Custom", "")
        resp.headers["X-Seen-TE"] = request.headers.get("TE", "")
        resp.headers["X-Seen-XFF"] = request.headers.get("X-Forwarded-For", "")
        resp.headers["X-Seen-Priority"] = request.headers.get("Lakehouse-Priority", "")
        resp.headers["Server"] = "Python/3.11 aiohttp/3.x"
        return resp

    async def daemon_error(_: web.Request) -> web.Response:
        body = {"error": {"code": "conflict", "message": f"corpus 'x' exists ({name})"},
                "request_id": "from-daemon"}
        return web.Response(status=409, text=json.dumps(body), content_type="application/json")

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(3)
        return web.Response(text="late")

    async def big(request: web.Request) -> web.StreamResponse:
        size = int(request.query["bytes"])
        resp = web.StreamResponse()
        resp.content_type = "application/octet-stream"
        await resp.prepare(request)
        block = bytes(range(256)) * 256  # 64 KiB
        sent = 0
        while sent < size:
            piece = block[: min(len(block), size - sent)]
            await resp.write(piece)
            sent += len(piece)
        await resp.write_eof()
        return resp

    async def answer(request: web.Request) -> web.StreamResponse:
        """An answer's stream: the first event at once, the rest a second later."""
        body = await request.json()
        if not body.get("stream"):
            return web.json_response({"answered": True})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'event: citations\ndata: {"type":"citations"}\n\n')
        await asyncio.sleep(1)
        await resp.write(b'event: done\ndata: {"type":"done"}\n\ndata: [DONE]\n\n')
        await resp.write_eof()
        return resp

    async def readyz(_: web.Request) -> web.Response:
        comps = {"postgres": {"status": "ok" if postgres_ok else "unavailable"}} if name == "vectord" else {}
        ok = postgres_ok or name != "vectord"
        return web.json_response({"status": "ok" if ok else "degraded", "components": comps},
                                 status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/v1/{daemon}/error", daemon_error)
    app.router.add_route("*", "/v1/{daemon}/slow", slow)
    app.router.add_get("/v1/{daemon}/big", big)
    app.router.add_post("/v1/matrix/answer", answer)
    app.router.add_route("*", "/{tail:.*}", echo)
    return app
