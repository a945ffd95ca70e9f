"""Search modes, filters and the /ids listing."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import aiohttp
import numpy as np

from internal.embedd.local import LocalModel
from tests.vectord.vdata import call, item, make_corpus, unit

C = "/v1/vectors/corpora"

TARGET = ("Release notes for the spring update: the scheduler now retries failed jobs with "
          "exponential backoff, dashboards load faster, and the importer reports ERR-40213 "
          "when a spreadsheet has duplicate header names. Thanks to everyone who filed bugs.")
NEAR_CODES = (40212, 40214, 40231, 40203, 41213, 40223, 40113, 40210, 40219, 40313)


async def test_keyword_finds_identifier_vector_misses(vectord_url: str,
                                                      http: aiohttp.ClientSession) -> None:
    model = LocalModel(threads=1)
    texts = [TARGET] + [f"ERR-{c}: request rejected" for c in NEAR_CODES]
    enc = await asyncio.to_thread(model.embed, texts)
    query = (await asyncio.to_thread(model.embed, ["ERR-40213"])).vectors[0]
    name = await make_corpus(http, vectord_url, dim=model.dim, model=model.id)
    items = [{"id": f"note-{i}", "vector": [float(x) for x in enc.vectors[i]], "text": t}
             for i, t in enumerate(texts)]
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items",
                              {"items": items, "model": model.id})
    assert status == 200, body

    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                              {"mode": "vector", "query_vector": [float(x) for x in query], "k": 5})
    assert status == 200, body
    assert "note-0" not in [h["id"] for h in body["hits"]]

    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                              {"mode": "keyword", "query_text": "err-40213", "k": 5})
    assert status == 200, body
    assert [h["id"] for h in body["hits"]] == ["note-0"]
    assert body["hits"][0]["distance"] is None and body["hits"][0]["score"] is None


async def test_keyword_substring_title_text_whole_words_first(vectord_url: str,
                                                              http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    url = f"{vectord_url}{C}/{name}"
    docs = [("a", "Alpha Widget", "plain text"), ("b", "other", "the WIDGETS are here"),
            ("c", "none", "nothing relevant"), ("d", "pct", "100% sure, 100_000 rows")]
    for i, (doc_id, title, text) in enumerate(docs):
        # One call each so updated_at increases: a, then b, then c, then d.
        await call(http, "POST", f"{url}/items",
                   {"items": [{"id": doc_id, "vector": unit(4, i), "title": title, "text": text}]})
    # A whole word of a title before a part of a word (b is newer: it came first before).
    _, body = await call(http, "POST", f"{url}/search", {"mode": "keyword", "query_text": "widget"})
    assert [h["id"] for h in body["hits"]] == ["a", "b"]
    # LIKE metacharacters in the query are literal.
    _, body = await call(http, "POST", f"{url}/search", {"mode": "keyword", "query_text": "0%"})
    assert [h["id"] for h in body["hits"]] == ["d"]
    _, body = await call(http, "POST", f"{url}/search", {"mode": "keyword", "query_text": "_"})
    assert [h["id"] for h in body["hits"]] == ["d"]
    for blank in ("", "   "):
        status, body = await call(http, "POST", f"{url}/search",
                                  {"mode": "keyword", "query_text": blank})
        assert status == 200 and body["hits"] == []
    # No text at all is a request the mode cannot run (its registry entry needs text).
    status, body = await call(http, "POST", f"{url}/search", {"mode": "keyword"})
    assert status == 400 and body["error"]["field"] == "query_text", body
    _, body = await call(http, "POST", f"{url}/search",
                         {"mode": "keyword", "query_text": "e", "k": 2})
    assert len(body["hits"]) == 2


async def test_filtered_vector_search_returns_k(vectord_url: str,
                                                http: aiohttp.ClientSession) -> None:
    """3% of 3,000 items match; a small ef_search still yields k matching rows."""
    dim, n, k = 16, 3000, 20
    name = await make_corpus(http, vectord_url, dim=dim)
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rare = set(range(0, n, 33))  # 91 items
    for start in range(0, n, 1000):
        batch = [{"id": f"v{i:05d}", "vector": [float(x) for x in vecs[i]], "text": f"t{i}",
                  "metadata": {"kind": "rare" if i in rare else "common", "tags": ["x", str(i % 7)]}}
                 for i in range(start, start + 1000)]
        status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": batch})
        assert status == 200, body
    q = rng.standard_normal(dim).astype(np.float32)
    q /= np.linalg.norm(q)
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search", {
        "mode": "vector", "query_vector": [float(x) for x in q], "k": k, "ef_search": k,
        "filter": {"metadata": {"kind": "rare"}}})
    assert status == 200, body
    got = [h["id"] for h in body["hits"]]
    assert len(got) == k
    assert all(h["metadata"]["kind"] == "rare" for h in body["hits"])
    distances = [h["distance"] for h in body["hits"]]
    assert distances == sorted(distances)
    # Compared with exact search over the matching items, most are the true neighbours.
    idx = np.array(sorted(rare))
    exact = idx[np.argsort(1 - vecs[idx] @ q)[:k]]
    assert len(set(got) & {f"v{i:05d}" for i in exact}) >= k * 0.8

    # Array containment, id prefix.
    _, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search", {
        "mode": "vector", "query_vector": [float(x) for x in q], "k": 5,
        "filter": {"metadata": {"tags": ["3"]}, "id_prefix": "v01"}})
    assert len(body["hits"]) == 5
    assert all(h["id"].startswith("v01") and "3" in h["metadata"]["tags"] for h in body["hits"])


async def test_updated_at_range(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    url = f"{vectord_url}{C}/{name}"
    await call(http, "POST", f"{url}/items", {"items": [item(1, 4)]})
    _, first = await call(http, "GET", f"{url}/items/doc-0001")
    await asyncio.sleep(0.05)
    await call(http, "POST", f"{url}/items", {"items": [item(2, 4)]})
    cut = first["updated_at"]
    for mode, extra in (("vector", {"query_vector": unit(4, 1)}),
                        ("keyword", {"query_text": "document"})):
        _, body = await call(http, "POST", f"{url}/search",
                             {"mode": mode, **extra, "filter": {"updated_after": cut}})
        assert [h["id"] for h in body["hits"]] == ["doc-0002"], mode
        later = (datetime.fromisoformat(cut) + timedelta(microseconds=1)).isoformat()
        _, body = await call(http, "POST", f"{url}/search",
                             {"mode": mode, **extra, "filter": {"updated_before": later}})
        assert [h["id"] for h in body["hits"]] == ["doc-0001"], mode
    future = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
    _, body = await call(http, "POST", f"{url}/search", {
        "mode": "vector", "query_vector": unit(4, 1), "filter": {"updated_after": future}})
    assert body["hits"] == []


async def test_ids_keyset_pagination(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=4)
    url = f"{vectord_url}{C}/{name}"
    items = [item(i, 4) for i in range(25)] + [{**item(99, 4), "id": "zeta/one"}]
    await call(http, "POST", f"{url}/items", {"items": items})
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        status, body = await call(http, "GET", f"{url}/ids?prefix=doc-&limit=10&after={after}")
        assert status == 200, body
        pages += 1
        seen += [row["id"] for row in body["items"]]
        assert all(len(row["content_hash"]) == 64 and row["updated_at"] for row in body["items"])
        if body["next_after"] is None:
            break
        after = body["next_after"]
    assert seen == [f"doc-{i:04d}" for i in range(25)] and pages == 3
    _, body = await call(http, "GET", f"{url}/ids")
    assert len(body["items"]) == 26 and body["next_after"] is None
    status, body = await call(http, "GET", f"{url}/ids?limit=10001")
    assert status == 400 and body["error"]["field"] == "limit"
