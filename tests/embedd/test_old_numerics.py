"""A corpus embedded by the shipped (float) numerics, searched with questions embedded by
the integer ones: the model id is the same (DECISIONS.md, "Vector and embeddings: integer
kernels": the mixed figures are within 0.003 of either), so an existing data directory
keeps its vectors, is served as it is, and ranks as it did."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from internal.embedd.local import LocalModel
from tests.helpers import require_shared
from tests.vectord.vdata import call, make_corpus

C = "/v1/vectors/corpora"
DOCS = 200


async def test_a_corpus_of_the_old_numerics_answers_new_questions_as_before(
        vectord_url: str, embedd_url: str, http: aiohttp.ClientSession) -> None:
    lines = require_shared("data", "cranfield", "corpus.jsonl").read_text().splitlines()
    docs = [json.loads(line) for line in lines[:DOCS]]
    docs = [d for d in docs if d.get("title", "").strip()]
    old = LocalModel(1, "float")
    vectors = (await asyncio.to_thread(old.embed, [f"{d['title']}\n{d['text']}" for d in docs]
                                       )).vectors
    name = await make_corpus(http, vectord_url, dim=old.dim, model=old.id)
    items = [{"id": d["_id"], "vector": [float(x) for x in v], "text": d["text"],
              "title": d["title"]} for d, v in zip(docs, vectors, strict=True)]
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items",
                              {"items": items, "model": old.id})
    assert status == 200, body

    # embedd serves the corpus's model: nothing to re-embed, nothing skipped.
    async with http.get(f"{embedd_url}/v1/embed/models") as resp:
        served = await resp.json()
    assert served["default"] == old.id
    status, corpus = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert corpus["model"] == served["default"] and "reembed" not in corpus, corpus

    titles = [d["title"] for d in docs]
    async with http.post(f"{embedd_url}/v1/embed",
                         json={"texts": titles, "input_type": "query"}) as resp:
        new_questions = (await resp.json())["vectors"]
    old_questions = (await asyncio.to_thread(old.embed, titles)).vectors

    async def top(query: list[float]) -> list[str]:
        status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/search",
                                  {"mode": "vector", "query_vector": query, "k": 3})
        assert status == 200, body
        return [h["id"] for h in body["hits"]]

    found_new = found_old = same_first = 0
    for d, q_new, q_old in zip(docs, new_questions, old_questions, strict=True):
        by_new, by_old = await top(q_new), await top([float(x) for x in q_old])
        found_new += d["_id"] in by_new
        found_old += d["_id"] in by_old
        same_first += by_new[0] == by_old[0]
    # Each title finds its own document in the top 3 as often as the old questions did
    # (within 1%), and the first hit is the same for nearly every question.
    assert found_new >= found_old - len(docs) // 100, (found_new, found_old)
    assert same_first >= 0.95 * len(docs), same_first
