"""The gateway's console files and its /mcp route (stub daemons behind it)."""

from __future__ import annotations

import aiohttp

from tests.gateway.conftest import GatewayFactory


async def test_console_is_served_open_with_auth_on(gateway: GatewayFactory,
                                                   http: aiohttp.ClientSession) -> None:
    base = await gateway(tokens=("s3cret",))
    async with http.get(f"{base}/") as resp:
        assert resp.status == 200
        assert resp.content_type == "text/html"
        page = await resp.text()
        csp = resp.headers["Content-Security-Policy"]
    assert '<script src="/console/app.js"' in page
    assert '<script src="/console/keys.js"' in page
    # The page may load and call its own origin only.
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
    for name, ctype in (("app.js", "text/javascript"), ("keys.js", "text/javascript"),
                        ("style.css", "text/css"), ("settings.json", "application/json")):
        async with http.get(f"{base}/console/{name}") as resp:
            assert resp.status == 200, name
            assert resp.content_type == ctype
    async with http.get(f"{base}/console/settings.json") as resp:
        assert (await resp.json())["playbook_corpus"] == "playbook_memory"
    # The API itself still wants the token; so does any other path under /console/.
    async with http.get(f"{base}/v1/matrix/corpora") as resp:
        assert resp.status == 401
    async with http.get(f"{base}/console/../v1/matrix/corpora") as resp:
        assert resp.status == 401


async def test_console_escapes_with_text_content_only(gateway: GatewayFactory,
                                                      http: aiohttp.ClientSession) -> None:
    base = await gateway()
    for name in ("app.js", "keys.js"):
        async with http.get(f"{base}/console/{name}") as resp:
            js = await resp.text()
        assert "innerHTML" not in js.replace("never innerHTML", ""), name
        assert "outerHTML" not in js and "insertAdjacentHTML" not in js, name
        assert "document.write" not in js, name
    async with http.get(f"{base}/console/nothing.js") as resp:
        assert resp.status == 404


async def test_mcp_route_passes_the_callers_token_to_mcpd_only(gateway: GatewayFactory,
                                                               http: aiohttp.ClientSession) -> None:
    base = await gateway(tokens=("s3cret",), service_token="svc")
    auth = {"Authorization": "Bearer s3cret"}
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    async with http.post(f"{base}/mcp", data=body, headers={**auth, "Content-Type": "application/json"}) as resp:
        assert resp.status == 200
        assert resp.headers["X-Served-By"] == "mcpd"
        # mcpd calls the gateway back as this caller, with this token.
        assert resp.headers["X-Seen-Auth"] == "Bearer s3cret"
        assert await resp.read() == body
    async with http.post(f"{base}/v1/matrix/search", data=b"{}", headers=auth) as resp:
        # Any other daemon sees the gateway's service token, never the caller's.
        assert resp.headers["X-Seen-Auth"] == "Bearer svc"
    async with http.post(f"{base}/mcp", data=body) as resp:
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"] == 'Bearer realm="lakehouse"'
        assert (await resp.json())["error"]["code"] == "unauthorized"
