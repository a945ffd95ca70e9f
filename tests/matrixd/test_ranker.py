"""The learned ranker through real matrixd, vectord and embedd, in-process: the train route
(and its errors), the model kept in PostgreSQL and read by every matrixd, serving (the
model named in the answer, `explain`), the fallback, and vectord's per-candidate values."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.api.vectord import Item
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.server import make_app
from tests import ranker_data
from tests.helpers import serve, url_of, with_section


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def matrix_cfg(base_cfg: Config, vectord_url: str, embedd_url: str) -> Config:
    return with_section(base_cfg, "matrixd", vectord_url=(vectord_url,),
                        embedd_url=(embedd_url,), ranker_auto=False,
                        ranker_refresh_seconds=0.2)


@pytest.fixture(scope="module")
async def matrix(base_cfg: Config, vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    server = await serve(make_app(matrix_cfg(base_cfg, vectord_url, embedd_url)))
    yield url_of(server)
    await server.close()


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as r:
        return r.status, await r.json()


async def load(vectord_url: str, embedd_url: str, name: str) -> None:
    """The ranker's test corpus, embedded by the real model."""
    items = ranker_data.docs()
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        e = await emb.embed([f"{d['title']}\n{d['text']}" for d in items])
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [Item(id=d["id"], vector=v, text=d["text"], title=d["title"],
                                     metadata=d["metadata"])
                                for d, v in zip(items, e.vectors, strict=True)], model=e.model)


async def record_all(http: aiohttp.ClientSession, matrix: str, corpus: str, playbook: str,
                     pairs: list[tuple[str, str]]) -> None:
    for q, answer in pairs:
        status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record", {
            "query_text": q, "answer_id": answer, "answer_corpus": corpus, "score": 1,
            "playbook_corpus": playbook})
        assert status == 200, out


@pytest.fixture(scope="module")
async def trained(matrix: str, vectord_url: str, embedd_url: str
                  ) -> AsyncIterator[tuple[str, str, dict[str, Any]]]:
    """(corpus, playbook, the train route's answer): every topic's right answer recorded,
    the model trained with `wait`."""
    corpus, playbook = unique("rk"), unique("rkpb")
    await load(vectord_url, embedd_url, corpus)
    async with aiohttp.ClientSession() as http:
        await record_all(http, matrix, corpus, playbook, ranker_data.records())
        status, out = await post(http, f"{matrix}/v1/matrix/ranker/train",
                                 {"playbook_corpus": playbook, "wait": True})
        assert status == 200, out
    yield corpus, playbook, out
    async with aiohttp.ClientSession() as s:
        vc = VectordClient(s, vectord_url)
        for name in (corpus, playbook):
            await vc.delete_corpus(name)


async def test_training_answers_the_model_and_its_figures(trained: tuple[str, str, Any]) -> None:
    corpus, playbook, out = trained
    assert out["playbook_corpus"] == playbook and out["corpora"] == [corpus]
    assert out["queries"] == len(ranker_data.TOPICS) and out["records"] == out["queries"]
    assert out["examples"] >= out["queries"] * 5 and out["seconds"] > 0
    # The short right answers are what the trees learn: far above the boost on the records.
    assert out["used"] is True and out["trees"] > 0, out
    assert out["ndcg10_ranker"] > out["ndcg10_boost"] + 0.2, out
    assert out["current"] is True and out["trained_by"] == "anonymous"


async def test_a_search_with_feedback_is_ordered_by_the_model(
        matrix: str, trained: tuple[str, str, Any], http: aiohttp.ClientSession) -> None:
    corpus, playbook, model = trained
    base = {"query_text": "tell me of the walrus", "corpora": [corpus], "k": 5,
            "playbook_corpus": playbook}
    status, plain = await post(http, f"{matrix}/v1/matrix/search", base)
    assert status == 200 and "ranker" not in plain
    assert all("ranker_score" not in h and "features" not in h for h in plain["hits"])
    status, ranked = await post(http, f"{matrix}/v1/matrix/search",
                                {**base, "use_playbook": True, "explain": True})
    assert status == 200, ranked
    assert ranked["ranker"]["applied"] is True and ranked["ranker"]["id"] == model["id"]
    assert ranked["ranker"]["reranked"] >= 5
    assert ranked["hits"][0]["id"] == ranker_data.right_id("walrus"), ranked["hits"][:3]
    scores = [h["ranker_score"] for h in ranked["hits"]]
    assert scores == sorted(scores, reverse=True)
    top = ranked["hits"][0]["ranker_contributions"]
    assert "alpha x fused" in top and len(top) >= 3 and "features" not in ranked["hits"][0]


async def test_every_matrixd_uses_the_stored_model(
        base_cfg: Config, vectord_url: str, embedd_url: str, trained: tuple[str, str, Any],
        http: aiohttp.ClientSession) -> None:
    corpus, playbook, model = trained
    other = await serve(make_app(matrix_cfg(base_cfg, vectord_url, embedd_url)))
    try:
        status, out = await post(http, f"{url_of(other)}/v1/matrix/search", {
            "query_text": "a kayak", "corpora": [corpus], "use_playbook": True,
            "playbook_corpus": playbook})
        assert status == 200, out
        assert out["ranker"]["id"] == model["id"]
        status, listed = await get(http, f"{url_of(other)}/v1/matrix/ranker"
                                         f"?playbook_corpus={playbook}")
        assert status == 200
        assert [(m["id"], m["current"]) for m in listed["models"]] == [(model["id"], True)]
    finally:
        await other.close()


async def test_too_few_records_fall_back_to_the_boost_and_say_why(
        matrix: str, trained: tuple[str, str, Any], http: aiohttp.ClientSession) -> None:
    corpus, _, _ = trained
    few, same = unique("rkfew"), unique("rkboost")
    pairs = ranker_data.records()[:5]
    for pb in (few, same):
        await record_all(http, matrix, corpus, pb, pairs)
    status, out = await post(http, f"{matrix}/v1/matrix/ranker/train",
                             {"playbook_corpus": few, "wait": True})
    assert status == 200, out
    assert out["used"] is False and out["trees"] == 0
    assert out["reason"].startswith("too few records: 5 recorded questions"), out
    body = {"query_text": "volcano?", "corpora": [corpus], "use_playbook": True, "k": 10}
    status, fallback = await post(http, f"{matrix}/v1/matrix/search", {**body, "playbook_corpus": few})
    assert status == 200
    assert fallback["ranker"] == {"applied": False, "reason": out["reason"]}
    status, boost = await post(http, f"{matrix}/v1/matrix/search", {**body, "playbook_corpus": same})
    assert "ranker" not in boost  # no model of that playbook
    assert [h["id"] for h in fallback["hits"]] == [h["id"] for h in boost["hits"]]
    status, listed = await get(http, f"{matrix}/v1/matrix/ranker?playbook_corpus={few}")
    assert listed["models"][0]["reason"] == out["reason"]


async def test_train_without_waiting_answers_202_then_lists_the_model(
        matrix: str, trained: tuple[str, str, Any], http: aiohttp.ClientSession) -> None:
    corpus, _, _ = trained
    pb = unique("rk202")
    await record_all(http, matrix, corpus, pb, ranker_data.records()[:3])
    status, out = await post(http, f"{matrix}/v1/matrix/ranker/train", {"playbook_corpus": pb})
    assert status == 202, out
    assert out["state"] == "running" and out["corpora"] == [corpus]
    for _ in range(200):
        status, listed = await get(http, f"{matrix}/v1/matrix/ranker?playbook_corpus={pb}")
        if listed["models"]:
            break
        await asyncio.sleep(0.1)
    assert listed["models"] and listed["models"][0]["current"] is True, listed


@pytest.mark.parametrize(("body", "status", "field", "code"), [
    ({"corpora": ["no_such_corpus_xyz"]}, 404, "corpora", "corpus_not_found"),
    ({"playbook_corpus": "no_such_playbook_xyz"}, 404, "playbook_corpus", "not_found"),
    ({"playbook_corpus": "Bad-Name"}, 400, "playbook_corpus", "invalid_argument"),
    ({"corpora": []}, 400, "corpora", "invalid_argument"),
    ({"wait": "yes"}, 400, "wait", "invalid_argument"),
    ({"corpus": "x"}, 400, None, "invalid_argument"),
])
async def test_train_route_errors_name_the_field(
        matrix: str, http: aiohttp.ClientSession, body: dict[str, Any], status: int,
        field: str | None, code: str) -> None:
    got, out = await post(http, f"{matrix}/v1/matrix/ranker/train", body)
    assert got == status, out
    assert out["error"]["code"] == code
    if field is not None:
        assert out["error"].get("field") == field, out


async def test_train_with_no_right_answer_in_the_corpora_is_a_409_naming_them(
        matrix: str, trained: tuple[str, str, Any], vectord_url: str, embedd_url: str,
        http: aiohttp.ClientSession) -> None:
    _, playbook, _ = trained
    other = unique("rkother")
    await load(vectord_url, embedd_url, other)
    try:
        status, out = await post(http, f"{matrix}/v1/matrix/ranker/train",
                                 {"playbook_corpus": playbook, "corpora": [other]})
        assert status == 409, out
        assert out["error"]["code"] == "no_records" and out["error"]["field"] == "corpora"
        assert other in out["error"]["message"]
    finally:
        async with aiohttp.ClientSession() as s:
            await VectordClient(s, vectord_url).delete_corpus(other)


async def test_vectord_gives_the_ranker_values_only_when_asked(
        vectord_url: str, embedd_url: str, trained: tuple[str, str, Any],
        http: aiohttp.ClientSession) -> None:
    corpus, _, _ = trained
    async with aiohttp.ClientSession() as s:
        vec = (await EmbedClient(s, embedd_url).embed(["piano?"], input_type="query")).vectors[0]
    body = {"mode": "hybrid", "query_text": "piano?", "query_vector": vec, "corpora": [corpus],
            "k": 20}
    status, plain = await post(http, f"{vectord_url}/v1/vectors/search", body)
    assert status == 200 and "query_stats" not in plain
    assert all("features" not in h for h in plain["hits"])
    status, asked = await post(http, f"{vectord_url}/v1/vectors/search", {**body, "features": True})
    assert status == 200, asked
    assert [h["id"] for h in asked["hits"]] == [h["id"] for h in plain["hits"]]
    assert asked["query_stats"]["lexemes"] == 1 and asked["query_stats"]["idf_max"] > 0
    f = {h["id"]: h["features"] for h in asked["hits"]}
    short, long0 = f[ranker_data.right_id("piano")], f["piano_long0"]
    assert short["text_match"] == 1.0 and short.get("title_match", 0.0) == 0.0
    assert long0["title_match"] == 1.0 and long0["text_words"] > short["text_words"]
    assert long0["bm25_rank"] < short["bm25_rank"] and long0["bm25"] > short["bm25"]
    status, out = await post(http, f"{vectord_url}/v1/vectors/search",
                             {**body, "mode": "lexical", "features": True})
    assert status == 400 and out["error"]["field"] == "features"
