"""The one error body of every daemon: built by error_body, applied by the middleware."""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web

from internal.common import errors
from internal.common.web import error_body, make_base_app, read_json
from tests.helpers import serve, url_of


class Body(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    n: int = 0


async def _raise(request: web.Request) -> web.Response:
    kind = request.match_info["kind"]
    if kind == "invalid":
        raise errors.InvalidArgument("n: must be positive", field="n")
    if kind == "conflict":
        raise errors.Conflict("model: differs", field="model", code="model_mismatch")
    if kind == "unavailable":
        raise errors.Unavailable("pg down", code="vectord_unavailable")
    if kind == "crash":
        raise RuntimeError("secret detail /etc/passwd")
    if kind == "internal":
        raise errors.LakehouseError("secret internal detail")
    await read_json(request, Body)
    return web.json_response({})


@pytest.fixture
async def base_url() -> Any:
    app = make_base_app(max_body_bytes=1024)
    app.router.add_post("/x/{kind}", _raise)
    server = await serve(app)
    yield url_of(server)
    await server.close()


def test_error_body_shape() -> None:
    # As sent: no `field` key unless one is at fault.
    assert msgspec.to_builtins(error_body("not_found", "corpus 'docs' not found", "rid")) == {
        "error": {"code": "not_found", "message": "corpus 'docs' not found"}, "request_id": "rid"}
    assert msgspec.to_builtins(error_body("invalid_argument", "m", "r", field="items[3].vector")
                               )["error"]["field"] == "items[3].vector"


@pytest.mark.parametrize(("path", "data", "status", "code", "field"), [
    ("/x/invalid", b"{}", 400, "invalid_argument", "n"),
    ("/x/conflict", b"{}", 409, "model_mismatch", "model"),
    ("/x/unavailable", b"{}", 503, "vectord_unavailable", None),
    ("/x/crash", b"{}", 500, "internal", None),
    ("/x/internal", b"{}", 500, "internal", None),
    ("/x/decode", b"{not json", 400, "invalid_json", None),
    ("/x/decode", b"", 400, "invalid_json", None),
    ("/x/decode", b'{"n": 1}', 400, "invalid_argument", "name"),
    ("/x/decode", b'{"name": "a", "n": "1"}', 400, "invalid_argument", "n"),
    ("/x/decode", b'{"name": "a", "extra": 1}', 400, "invalid_argument", "extra"),
    ("/x/decode", b"x" * 4096, 413, "payload_too_large", None),
    ("/nowhere", b"{}", 404, "not_found", None),
])
async def test_every_error_has_the_one_shape(base_url: str, http: aiohttp.ClientSession,
                                             path: str, data: bytes, status: int, code: str,
                                             field: str | None) -> None:
    async with http.post(base_url + path, data=data,
                         headers={"X-Request-ID": "req-123"}) as resp:
        body = await resp.json()
        assert resp.status == status
        assert resp.headers["X-Request-ID"] == "req-123"
    assert set(body) == {"error", "request_id"} and body["request_id"] == "req-123"
    assert set(body["error"]) <= {"code", "message", "field"}
    assert body["error"]["code"] == code and isinstance(body["error"]["message"], str)
    assert body["error"].get("field") == field
    if status >= 500:
        assert body["error"]["message"] == "internal error" or code.endswith("_unavailable")
        assert "secret" not in body["error"]["message"]


async def test_request_id_made_when_absent(base_url: str, http: aiohttp.ClientSession) -> None:
    async with http.post(base_url + "/x/invalid", data=b"{}") as resp:
        body = await resp.json()
        assert body["request_id"] and resp.headers["X-Request-ID"] == body["request_id"]


async def test_vectord_errors_share_the_shape(vectord_url: str, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{vectord_url}/v1/vectors/corpora/no_such_corpus_here") as resp:
        body = await resp.json()
    assert resp.status == 404
    assert body["error"]["code"] == "corpus_not_found" and set(body) == {"error", "request_id"}
