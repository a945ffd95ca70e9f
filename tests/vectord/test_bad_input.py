"""Every kind of bad input: a 4xx in the common error shape naming the field; nothing written."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.vectord.vdata import call, item, make_corpus, unique, unit

C = "/v1/vectors/corpora"


def assert_error(status: int, body: Any, expect_status: int, code: str,
                 field: str | None = None) -> None:
    assert status == expect_status, body
    assert set(body) == {"error", "request_id"} and body["request_id"]
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    if field is not None:
        assert body["error"].get("field") == field, body
        assert field in body["error"]["message"]


async def count(http: aiohttp.ClientSession, base: str, name: str) -> int:
    status, body = await call(http, "GET", f"{base}{C}/{name}")
    assert status == 200, body
    return int(body["count"])


async def corpus_names(http: aiohttp.ClientSession, base: str) -> set[str]:
    _, body = await call(http, "GET", f"{base}{C}")
    return {c["name"] for c in body["corpora"]}


@pytest.mark.parametrize(("body", "field"), [
    ({"dim": 4}, "name"),
    ({"name": "ok_name"}, "dim"),
    ({"name": "ok_name", "dim": "ten"}, "dim"),
    ({"name": "ok_name", "dim": 0}, "dim"),
    ({"name": "ok_name", "dim": 4, "metric": "manhattan"}, "metric"),
    ({"name": "ok_name", "dim": 4, "language": "klingon"}, "language"),
    ({"name": "x'; DROP TABLE vectord_corpora; --", "dim": 4}, "name"),
    ({"name": "Upper", "dim": 4}, "name"),
    ({"name": "ok_name", "dim": 4, "colour": "red"}, "colour"),
])
async def test_create_corpus_rejects(vectord_url: str, http: aiohttp.ClientSession,
                                     body: dict[str, Any], field: str) -> None:
    before = await corpus_names(http, vectord_url)
    status, out = await call(http, "POST", f"{vectord_url}{C}", body)
    assert_error(status, out, 400, "invalid_argument", field)
    assert await corpus_names(http, vectord_url) == before


async def test_create_malformed_json(vectord_url: str, http: aiohttp.ClientSession) -> None:
    status, out = await call(http, "POST", f"{vectord_url}{C}", raw=b'{"name": "a", "dim": ')
    assert_error(status, out, 400, "invalid_json")


async def test_existing_corpus_conflict(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    status, out = await call(http, "POST", f"{vectord_url}{C}", {"name": name, "dim": 8})
    assert_error(status, out, 409, "conflict", "name")
    _, got = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert got["dim"] == 4


async def test_unknown_corpus_404(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = unique("missing")
    for method, path, body in (
        ("GET", "", None), ("DELETE", "", None),
        ("POST", "/items", {"items": [item(1, 4)]}),
        ("GET", "/items/x", None), ("GET", "/ids", None),
        ("POST", "/items/delete", {"ids": ["x"]}),
        ("POST", "/search", {"mode": "vector", "query_vector": unit(4, 1)}),
    ):
        status, out = await call(http, method, f"{vectord_url}{C}/{name}{path}", body)
        assert_error(status, out, 404, "corpus_not_found")
        assert name in out["error"]["message"]
    assert name not in await corpus_names(http, vectord_url)


async def test_bad_name_in_path(vectord_url: str, http: aiohttp.ClientSession) -> None:
    status, out = await call(http, "GET", f"{vectord_url}{C}/a%27%3B%20DROP")
    assert_error(status, out, 400, "invalid_argument", "name")


def _nan_body(token: str) -> bytes:
    good = '{"id": "a", "vector": [0.1, 0.2, 0.3, 0.4], "text": "ok"}'
    bad = '{"id": "b", "vector": [0.1, ' + token + ', 0.3, 0.4], "text": "bad"}'
    return ('{"items": [' + good + ", " + bad + "]}").encode()


BAD_BATCHES: list[tuple[str, Any, str | None, str]] = [
    ("malformed", b'{"items": [{"id": "a", "vector": [1, 2', None, "invalid_json"),
    ("nan", _nan_body("NaN"), "items[1].vector[1]", "invalid_argument"),
    ("infinity", _nan_body("Infinity"), "items[1].vector[1]", "invalid_argument"),
    ("float32 overflow", _nan_body("1e39"), "items[1].vector", "invalid_argument"),
    ("missing text", {"items": [item(0, 4), {"id": "x", "vector": unit(4, 1)}]},
     "items[1].text", "invalid_argument"),
    ("mistyped id", {"items": [item(0, 4), {**item(1, 4), "id": 7}]},
     "items[1].id", "invalid_argument"),
    ("wrong dim", {"items": [item(i, 4) for i in range(3)] + [{**item(3, 4), "vector": unit(12, 3)}]},
     "items[3].vector", "invalid_argument"),
    ("empty id", {"items": [item(0, 4), {**item(1, 4), "id": ""}]}, "items[1].id", "invalid_argument"),
    ("unknown field", {"items": [{**item(0, 4), "colour": "red"}]},
     "items[0].colour", "invalid_argument"),
    ("bad language", {"items": [item(0, 4), {**item(1, 4), "language": "klingon"}]},
     "items[1].language", "invalid_argument"),
    ("nul in text", {"items": [item(0, 4), {**item(1, 4), "text": "a\u0000b"}]},
     "items[1].text", "invalid_argument"),
    ("items missing", {"model": "m"}, "items", "invalid_argument"),
]


@pytest.mark.parametrize(("case", "body", "field", "code"), BAD_BATCHES,
                         ids=[b[0] for b in BAD_BATCHES])
async def test_bad_batch_writes_nothing(vectord_url: str, http: aiohttp.ClientSession,
                                        case: str, body: Any, field: str | None, code: str) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    url = f"{vectord_url}{C}/{name}/items"
    if isinstance(body, bytes):
        status, out = await call(http, "POST", url, raw=body)
    else:
        status, out = await call(http, "POST", url, body)
    assert_error(status, out, 400, code, field)
    if case == "wrong dim":
        assert out["error"]["message"] == "items[3].vector: expected 4 numbers, got 12"
    assert await count(http, vectord_url, name) == 0


async def test_batch_over_limit_413(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=2)
    items = [{"id": str(i), "vector": [1.0, float(i)], "text": ""} for i in range(1001)]
    status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": items})
    assert_error(status, out, 413, "payload_too_large", "items")
    assert await count(http, vectord_url, name) == 0


async def test_model_mismatch_refused(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4, model="model-a")
    url = f"{vectord_url}{C}/{name}/items"
    status, out = await call(http, "POST", url, {"items": [item(1, 4)], "model": "model-b"})
    assert_error(status, out, 409, "model_mismatch", "model")
    assert "model-a" in out["error"]["message"] and "model-b" in out["error"]["message"]
    assert await count(http, vectord_url, name) == 0
    status, _ = await call(http, "POST", url, {"items": [item(1, 4)], "model": "model-a"})
    assert status == 200
    status, _ = await call(http, "POST", url, {"items": [item(2, 4)]})  # unlabelled: accepted
    assert status == 200 and await count(http, vectord_url, name) == 2


async def test_unlabelled_corpus_takes_first_model(vectord_url: str,
                                                   http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    url = f"{vectord_url}{C}/{name}/items"
    status, _ = await call(http, "POST", url, {"items": [item(1, 4)], "model": "first"})
    assert status == 200
    _, corpus = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert corpus["model"] == "first"
    status, out = await call(http, "POST", url, {"items": [item(2, 4)], "model": "second"})
    assert_error(status, out, 409, "model_mismatch", "model")


@pytest.mark.parametrize(("body", "field"), [
    ({"mode": "vector"}, "query_vector"),
    ({"mode": "vector", "query_vector": [1.0, 2.0]}, "query_vector"),
    ({"mode": "vector", "query_vector": [0.0, 0.0, 0.0, 0.0]}, "query_vector"),
    ({"mode": "telepathy", "query_text": "x"}, "mode"),
    ({"mode": "keyword", "query_text": "x", "k": 0}, "k"),
    ({"mode": "keyword", "query_text": "x", "k": "ten"}, "k"),
    ({"mode": "vector", "query_vector": [1.0, 0, 0, 0], "ef_search": 5000}, "ef_search"),
    ({"mode": "keyword", "query_text": "x", "filter": {"updated_after": "yesterday"}},
     "filter.updated_after"),
    ({"mode": "keyword", "query_text": "x", "filter": {"colour": 1}}, "filter.colour"),
])
async def test_bad_search(vectord_url: str, http: aiohttp.ClientSession,
                          body: dict[str, Any], field: str) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/search", body)
    assert_error(status, out, 400, "invalid_argument", field)


async def test_search_nan_query(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    raw = b'{"mode": "vector", "query_vector": [1, NaN, 0, 0]}'
    status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/search", raw=raw)
    assert_error(status, out, 400, "invalid_argument", "query_vector[1]")
