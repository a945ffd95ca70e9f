"""The web console: static files shipped in the package, served by the gateway at `/`.

No build step, nothing fetched from another host: the Content-Security-Policy lets the
page load and call its own origin only. The page calls the same public API as everyone
(with the bearer token the user types in when the API answers 401; kept in the tab's
sessionStorage, never on the server).
"""

from __future__ import annotations

from importlib import resources

import msgspec
from aiohttp import web

from internal.config import Config

# Files under internal/gateway/console/ (package data in pyproject.toml).
FILES = {"index.html": "text/html", "app.js": "text/javascript", "keys.js": "text/javascript",
         "answer.js": "text/javascript", "style.css": "text/css", "favicon.svg": "image/svg+xml"}
# Browsers ask for /favicon.ico by themselves; it is the page's icon (an SVG) too.
FAVICON = "/favicon.ico"
OPEN_PATHS = frozenset({"/", FAVICON, *(f"/console/{name}" for name in FILES),
                        "/console/settings.json"})

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _load() -> dict[str, bytes]:
    folder = resources.files("internal.gateway") / "console"
    return {name: (folder / name).read_bytes() for name in FILES}


def add_routes(app: web.Application, cfg: Config) -> None:
    """GET / (the page), GET /console/{file} and /console/settings.json."""
    files = _load()
    # What the page cannot know otherwise: the playbook corpus is not a corpus to search.
    settings = msgspec.json.encode({"playbook_corpus": cfg.matrixd.playbook_corpus})

    def reply(body: bytes, content_type: str) -> web.Response:
        return web.Response(body=body, content_type=content_type, charset="utf-8",
                            headers=HEADERS)

    async def index(_: web.Request) -> web.Response:
        return reply(files["index.html"], FILES["index.html"])

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "settings.json":
            return reply(settings, "application/json")
        if name not in FILES:
            raise web.HTTPNotFound()
        return reply(files[name], FILES[name])

    async def favicon(_: web.Request) -> web.Response:
        return reply(files["favicon.svg"], FILES["favicon.svg"])

    app.router.add_get("/", index)
    app.router.add_get(FAVICON, favicon)
    app.router.add_get("/console/{name}", static)
