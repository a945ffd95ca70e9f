"""Lexical (BM25) and hybrid search through the real vectord app and PostgreSQL."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

import aiohttp
import numpy as np
import psycopg
import pytest
from psycopg import sql

from internal.api.vectord import MAX_RRF_K
from internal.vectord.lexical import sql_index
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"


async def _upsert(http: aiohttp.ClientSession, base: str, name: str,
                  items: list[dict[str, Any]]) -> None:
    status, body = await call(http, "POST", f"{base}{C}/{name}/items", {"items": items})
    assert status == 200, body


async def _search(http: aiohttp.ClientSession, base: str, name: str,
                  **req: Any) -> list[dict[str, Any]]:
    status, body = await call(http, "POST", f"{base}{C}/{name}/search", req)
    assert status == 200, body
    hits: list[dict[str, Any]] = body["hits"]
    return hits


def _doc(doc_id: str, seed: int, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": doc_id, "vector": unit(8, seed), "text": text, **extra}


async def test_english_stems_match(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, language="en")
    await _upsert(http, vectord_url, name, [
        _doc("pension", 1, "Planning your retirement: pensions and savings."),
        _doc("garden", 2, "Growing tomatoes in a small garden."),
    ])
    hits = await _search(http, vectord_url, name, mode="lexical", query_text="retiring early")
    assert [h["id"] for h in hits] == ["pension"]
    assert hits[0]["score"] > 0 and hits[0]["ranks"] == {"vector": None, "lexical": 1}
    assert hits[0]["scores"]["lexical"] == hits[0]["score"] and hits[0]["distance"] is None


async def test_german_stems_match_only_when_german(vectord_url: str,
                                                   http: aiohttp.ClientSession) -> None:
    text = "Die alten Häuser am Fluss und ihre Bücher"
    german = await make_corpus(http, vectord_url, language="english")
    await _upsert(http, vectord_url, german, [
        _doc("de-1", 1, text, language="de"),
        _doc("en-1", 2, "Old houses by the river and their books"),
    ])
    hits = await _search(http, vectord_url, german, mode="lexical", query_text="Haus Buch",
                         language="de")
    assert [h["id"] for h in hits] == ["de-1"]
    assert hits[0]["language"] == "german"

    simple = await make_corpus(http, vectord_url, language="simple")
    await _upsert(http, vectord_url, simple, [_doc("de-1", 1, text)])
    assert await _search(http, vectord_url, simple, mode="lexical", query_text="Haus Buch") == []
    assert await _search(http, vectord_url, simple, mode="lexical", query_text="Haus Buch",
                         language="de") == []
    # The exact words still match in the simple corpus.
    hits = await _search(http, vectord_url, simple, mode="lexical", query_text="häuser")
    assert [h["id"] for h in hits] == ["de-1"]


async def test_auto_corpus_detects_item_languages(vectord_url: str,
                                                  http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, language="auto")
    await _upsert(http, vectord_url, name, [
        _doc("de", 1, "Die alten Häuser am Fluss wurden im letzten Jahrhundert gebaut."),
        _doc("en", 2, "The old houses by the river were built in the last century."),
        _doc("short", 3, "Häuser"),
    ])
    got = {h["id"]: h["language"] for h in await _search(
        http, vectord_url, name, mode="lexical", query_text="Häuser houses", k=10)}
    assert got["de"] == "german" and got["en"] == "english" and got["short"] == "simple"
    # No query language in an auto corpus: the query is stemmed in each corpus language.
    hits = await _search(http, vectord_url, name, mode="lexical", query_text="Haus")
    assert [h["id"] for h in hits] == ["de"]
    hits = await _search(http, vectord_url, name, mode="lexical", query_text="house")
    assert [h["id"] for h in hits] == ["en"]


def bm25_sql(docs: dict[str, list[str]], query: list[str], k1: float = 1.2,
          b: float = 0.75) -> dict[str, float]:
    """Okapi BM25 by the textbook, over pre-tokenised documents; a query term counts as
    often as it occurs in the query (Robertson's qtf, k3 = infinity)."""
    n = len(docs)
    avgdl = sum(len(toks) for toks in docs.values()) / n
    out: dict[str, float] = {}
    for doc_id, toks in docs.items():
        tf = Counter(toks)
        score = 0.0
        for term, qtf in Counter(query).items():
            if tf[term] == 0:
                continue
            df = sum(1 for other in docs.values() if term in other)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += qtf * idf * tf[term] * (k1 + 1) / (
                tf[term] + k1 * (1 - b + b * len(toks) / avgdl))
        if score:
            out[doc_id] = score
    return out


THREE = {
    "d1": ("apple banana", "apple apple cherry"),
    "d2": ("banana", "banana cherry date elderberry fig"),
    "d3": ("grape", "apple date"),
}


async def test_bm25_equals_hand_reference(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, language="simple")
    await _upsert(http, vectord_url, name, [
        _doc(d, i, text, title=title) for i, (d, (title, text)) in enumerate(THREE.items())])
    for query in ("apple", "banana cherry", "apple date fig", "grape banana",
                  "apple apple banana", "date fig date date"):
        terms = query.split()
        plain = {d: (t + " " + x).split() for d, (t, x) in THREE.items()}
        want = bm25_sql(plain, terms)
        hits = await _search(http, vectord_url, name, mode="lexical", query_text=query)
        got = {h["id"]: h["score"] for h in hits}
        assert got.keys() == want.keys(), query
        for d, s in want.items():
            assert got[d] == pytest.approx(s, rel=1e-9), (query, d)
        assert [h["id"] for h in hits] == sorted(want, key=lambda d: (-want[d], d))

    # Per-request k1, b and field weights: the title counts twice, the text once.
    weighted = {d: t.split() * 2 + x.split() for d, (t, x) in THREE.items()}
    want = bm25_sql(weighted, ["banana", "apple"], k1=0.9, b=0.4)
    hits = await _search(http, vectord_url, name, mode="lexical", query_text="banana apple",
                         bm25_k1=0.9, bm25_b=0.4,
                         field_weights={"title": 2.0, "text": 1.0, "tags": 0.0})
    assert {h["id"]: h["score"] for h in hits} == pytest.approx(want, rel=1e-9)


CORPUS = [
    ("a", "Solar panels convert sunlight into electricity."),
    ("b", "Wind turbines generate electricity from moving air."),
    ("c", "Electricity prices rose sharply this winter."),
    ("d", "A recipe for apple pie with cinnamon."),
    ("e", "Batteries store electricity from solar panels for the night."),
    ("f", "Hydroelectric dams turn falling water into electricity."),
]
QUERIES = ("solar electricity", "electricity", "apple pie", "water wind night")


async def test_statistics_survive_delete_and_reupsert(vectord_url: str,
                                                      http: aiohttp.ClientSession) -> None:
    churned = await make_corpus(http, vectord_url)
    await _upsert(http, vectord_url, churned,
                  [_doc(d, i, t) for i, (d, t) in enumerate(CORPUS)]
                  + [_doc("x", 9, "Temporary note about solar electricity and apple pie.")])
    status, _ = await call(http, "POST", f"{vectord_url}{C}/{churned}/items/delete",
                           {"ids": ["a", "c", "x"]})
    assert status == 200
    # Changed text, unchanged text, a language change, and re-upserts of deleted ids.
    await _upsert(http, vectord_url, churned, [
        _doc("b", 1, "Wind turbines make electricity when the wind blows."),
        _doc("d", 3, CORPUS[3][1]),
        _doc("f", 5, CORPUS[5][1], language="simple"),
        _doc("a", 0, CORPUS[0][1]),
        _doc("c", 2, "Electricity prices fell this spring."),
    ])
    fresh = await make_corpus(http, vectord_url)
    final = dict(CORPUS) | {"b": "Wind turbines make electricity when the wind blows.",
                            "c": "Electricity prices fell this spring."}
    await _upsert(http, vectord_url, fresh, [
        _doc(d, i, t, **({"language": "simple"} if d == "f" else {}))
        for i, (d, t) in enumerate(sorted(final.items()))])
    for query in QUERIES:
        got = await _search(http, vectord_url, churned, mode="lexical", query_text=query, k=10)
        want = await _search(http, vectord_url, fresh, mode="lexical", query_text=query, k=10)
        assert [h["id"] for h in got] == [h["id"] for h in want], query
        assert [h["score"] for h in got] == pytest.approx([h["score"] for h in want], rel=1e-9)


async def _hybrid_corpus(http: aiohttp.ClientSession, base: str) -> str:
    name = await make_corpus(http, base)
    # Vectors: "both" and "vec-*" near unit(8, 100); "both" and "lex-*" mention the words.
    near = unit(8, 100)
    docs = [
        {"id": "vec-1", "vector": near, "text": "nothing in common here"},
        {"id": "vec-2", "vector": [x + 0.05 * y for x, y in zip(near, unit(8, 7), strict=True)],
         "text": "also unrelated words"},
        {"id": "both", "vector": [x + 0.1 * y for x, y in zip(near, unit(8, 8), strict=True)],
         "text": "quarterly revenue report"},
        {"id": "lex-1", "vector": unit(8, 1), "text": "quarterly revenue report revenue"},
        {"id": "lex-2", "vector": unit(8, 2), "text": "revenue"},
    ]
    await _upsert(http, base, name, docs)
    return name


async def test_hybrid_both_branches_outrank_single(vectord_url: str,
                                                   http: aiohttp.ClientSession) -> None:
    name = await _hybrid_corpus(http, vectord_url)
    q = unit(8, 100)
    vec = await _search(http, vectord_url, name, mode="vector", query_vector=q, k=5)
    lex = await _search(http, vectord_url, name, mode="lexical",
                        query_text="quarterly revenue", k=5)
    assert vec[0]["id"] != "both" and lex[0]["id"] != "both"
    # Three candidates a branch: the vector branch holds vec-1, vec-2, both; the
    # lexical one lex-1, both, lex-2.
    # RRF named explicitly: the default fusion is weighted.
    hits = await _search(http, vectord_url, name, mode="hybrid", query_vector=q,
                         query_text="quarterly revenue", k=3, candidates=3, fusion="rrf", rrf_k=60)
    top = hits[0]
    assert top["id"] == "both"
    vrank, lrank = top["ranks"]["vector"], top["ranks"]["lexical"]
    assert vrank == [h["id"] for h in vec].index("both") + 1
    assert lrank == [h["id"] for h in lex].index("both") + 1
    assert top["score"] == pytest.approx(1 / (60 + vrank) + 1 / (60 + lrank))
    assert top["distance"] == pytest.approx(vec[vrank - 1]["distance"])
    assert top["scores"]["lexical"] == pytest.approx(lex[lrank - 1]["score"])
    # The two branch leaders tie on 1 / 61; fusion.py's rule (the one fusion, rrf
    # included, since federation): the better single rank, then the vector branch first.
    assert [h["id"] for h in hits][1:] == ["vec-1", "lex-1"]
    assert hits[2]["ranks"] == {"vector": None, "lexical": 1}
    assert hits[2]["distance"] is None and hits[2]["scores"]["vector"] is None
    assert hits[1]["ranks"] == {"vector": 1, "lexical": None}
    assert hits[1]["scores"]["lexical"] is None
    # rrf_k is a request option.
    hits = await _search(http, vectord_url, name, mode="hybrid", query_vector=q,
                         query_text="quarterly revenue", k=5, rrf_k=1, fusion="rrf")
    assert hits[0]["score"] == pytest.approx(
        1 / (1 + hits[0]["ranks"]["vector"]) + 1 / (1 + hits[0]["ranks"]["lexical"]))
    # Its range is the wire type's alone (1..MAX_RRF_K), the same at every daemon.
    hits = await _search(http, vectord_url, name, mode="hybrid", query_vector=q,
                         query_text="quarterly revenue", k=5, rrf_k=MAX_RRF_K, fusion="rrf")
    assert hits[0]["score"] == pytest.approx(
        1 / (MAX_RRF_K + hits[0]["ranks"]["vector"])
        + 1 / (MAX_RRF_K + hits[0]["ranks"]["lexical"]))


async def test_hybrid_with_one_empty_branch(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await _hybrid_corpus(http, vectord_url)
    q = unit(8, 100)
    vec = await _search(http, vectord_url, name, mode="vector", query_vector=q, k=5)
    # No lexeme of the query occurs anywhere: the vector branch's order.
    hits = await _search(http, vectord_url, name, mode="hybrid", query_vector=q,
                         query_text="zeppelin", k=5)
    assert [h["id"] for h in hits] == [h["id"] for h in vec]
    assert all(h["ranks"]["lexical"] is None for h in hits)
    # Stop words only: no lexemes at all.
    hits = await _search(http, vectord_url, name, mode="hybrid", query_vector=q,
                         query_text="the of and", k=5)
    assert [h["id"] for h in hits] == [h["id"] for h in vec]
    # No query vector: the lexical branch's order.
    lex = await _search(http, vectord_url, name, mode="lexical", query_text="revenue", k=5)
    hits = await _search(http, vectord_url, name, mode="hybrid", query_text="revenue", k=5)
    assert [h["id"] for h in hits] == [h["id"] for h in lex]
    assert all(h["distance"] is None and h["ranks"]["vector"] is None for h in hits)


async def test_filter_applies_to_both_branches(vectord_url: str,
                                               http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url)
    await _upsert(http, vectord_url, name, [
        _doc(f"d{i}", i, "shared words about budgets", metadata={"team": "a" if i % 2 else "b"})
        for i in range(10)])
    for mode in ("lexical", "hybrid"):
        hits = await _search(http, vectord_url, name, mode=mode, query_text="budget",
                             query_vector=unit(8, 0), k=10, filter={"metadata": {"team": "a"}})
        assert sorted(h["id"] for h in hits) == ["d1", "d3", "d5", "d7", "d9"], mode


@pytest.mark.parametrize(("req", "field"), [
    ({"mode": "lexical", "query_text": "x", "language": "xx"}, "language"),
    ({"mode": "lexical"}, "query_text"),
    ({"mode": "hybrid"}, "query_text"),
    ({"mode": "lexical", "query_text": "x", "bm25_b": 2.0}, "bm25_b"),
    ({"mode": "hybrid", "query_text": "x", "query_vector": unit(8, 0), "rrf_k": 0}, "rrf_k"),
    ({"mode": "hybrid", "query_text": "x", "query_vector": unit(8, 0), "k": 10,
      "candidates": 5}, "candidates"),
    ({"mode": "lexical", "query_text": "x", "field_weights": {"title": -1}},
     "field_weights.title"),
])
async def test_bad_lexical_requests(vectord_url: str, http: aiohttp.ClientSession,
                                    req: dict[str, Any], field: str) -> None:
    name = await make_corpus(http, vectord_url)
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search", req)
    assert status == 400, body
    assert body["error"]["field"] == field


async def test_unknown_language_names_field(vectord_url: str, http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "POST", f"{vectord_url}{C}",
                              {"name": "lang_bad", "dim": 8, "language": "klingon"})
    assert status == 400 and body["error"]["field"] == "language", body
    name = await make_corpus(http, vectord_url)
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
        _doc("ok", 1, "fine"), _doc("bad", 2, "text", language="zz")]})
    assert status == 400 and body["error"]["field"] == "items[1].language", body


async def test_pruned_top_n_equals_exhaustive(vectord_url: str, pg_dsn: str,
                                              http: aiohttp.ClientSession) -> None:
    """vectord_bm25_top (MaxScore) returns exactly the exhaustive BM25 top n."""
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(60)]
    # Zipf-like word frequencies: a few very common words, many rare ones.
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    name = await make_corpus(http, vectord_url, language="simple")
    docs = [_doc(f"d{i:03d}", i, " ".join(rng.choice(vocab, size=int(rng.integers(3, 40)), p=p)))
            for i in range(400)]
    await _upsert(http, vectord_url, name, docs)
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (name,))
        row = await cur.fetchone()
        assert row is not None
        cid = int(row[0])
        table = sql.Identifier(f"vectord_items_{cid}")
        for trial in range(40):
            query = " ".join(rng.choice(vocab, size=int(rng.integers(2, 9)), p=p))
            if trial % 2:  # repeated query terms weigh more; the bounds scale alike
                words = query.split()
                query += f" {words[-1]} {words[0]}"
            n = int(rng.choice([1, 3, 10]))
            params = sql_index.bm25_params(query, ["simple"], 1.2, 0.75,
                                         sql_index.DEFAULT_FIELD_WEIGHTS, n)
            want = await (await conn.execute(sql_index.lexical_sql(
                table, cid, ["simple"], sql.SQL("TRUE"), False, exhaustive=True), params)).fetchall()
            for budget in (1, 50, 400):
                got = await (await conn.execute(sql_index.lexical_sql(
                    table, cid, ["simple"], sql.SQL("TRUE"), False, budget=budget),
                    params)).fetchall()
                assert [r[0] for r in got] == [r[0] for r in want], (trial, query, budget)
                assert [r[-2] for r in got] == pytest.approx([r[-2] for r in want], rel=1e-9)


async def test_concurrent_upserts_keep_statistics_exact(vectord_url: str,
                                                        http: aiohttp.ClientSession) -> None:
    """Overlapping batches written at once neither deadlock nor skew the statistics."""
    words = ["solar", "wind", "battery", "grid", "storage", "price", "winter", "turbine"]
    name = await make_corpus(http, vectord_url)

    def batch(seed: int) -> list[dict[str, Any]]:
        rng = np.random.default_rng(seed)
        ids = rng.permutation(30)[:20]
        return [_doc(f"d{i:02d}", int(i),
                     " ".join(rng.choice(words, size=int(rng.integers(2, 12))))) for i in ids]

    results = await asyncio.gather(*(
        call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": batch(s)})
        for s in range(6)))
    assert all(status == 200 for status, _ in results), results
    status, listing = await call(http, "GET", f"{vectord_url}{C}/{name}/ids?limit=100")
    assert status == 200
    stored = []
    for row in listing["items"]:
        _, item = await call(http, "GET", f"{vectord_url}{C}/{name}/items/{row['id']}")
        stored.append(_doc(item["id"], 0, item["text"]))
    fresh = await make_corpus(http, vectord_url)
    await _upsert(http, vectord_url, fresh, stored)
    for query in ("solar wind", "battery storage price", "winter"):
        got = await _search(http, vectord_url, name, mode="lexical", query_text=query, k=30)
        want = await _search(http, vectord_url, fresh, mode="lexical", query_text=query, k=30)
        assert [(h["id"], h["score"]) for h in got] == [
            (h["id"], pytest.approx(h["score"], rel=1e-9)) for h in want], query
