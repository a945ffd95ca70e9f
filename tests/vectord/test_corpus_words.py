"""A corpus's words stemmed when it is loaded whole: its highlights then run no stemming
statement; a learning that fails is reported and the highlights go on as before."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from internal.vectord.lexical import corpus_words
from internal.vectord.shaping import highlight
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"

TEXTS = ["The marshworts were flowering along the ditches of the fen.",
         "Zephyrines drift over hollowed dunes; a marshwort grows there too.",
         "Quillworts, unlike marshworts, live under water in cold lakes."]


async def _loaded(http: aiohttp.ClientSession, base: str, key: str, texts: list[str]) -> str:
    """A corpus of `texts`, searched once (so it is loaded whole), and the learning of
    its words (`key` of LEARNT: done or failed) awaited."""
    name = await make_corpus(http, base, dim=8)
    items = [{"id": f"d{i}", "vector": unit(8, i), "text": t, "title": t.split()[1],
              "language": "english"} for i, t in enumerate(texts)]
    status, body = await call(http, "POST", f"{base}{C}/{name}/items", {"items": items})
    assert status == 200, body
    before = corpus_words.LEARNT[key]
    await _search(http, base, name, query_text="water")
    for _ in range(200):
        if corpus_words.LEARNT[key] > before:
            return name
        await asyncio.sleep(0.05)
    raise AssertionError(f"the corpus's words were never {key}: {corpus_words.LEARNT}")


async def _search(http: aiohttp.ClientSession, base: str, name: str, **body: Any
                  ) -> list[dict[str, Any]]:
    status, out = await call(http, "POST", f"{base}{M}", {
        "corpora": [name], "mode": "lexical", "k": 10, **body})
    assert status == 200, out
    return list(out["hits"])


async def test_a_corpus_loaded_whole_is_highlighted_with_no_stemming_statement(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await _loaded(http, vectord_url, "corpora", TEXTS)
    stemmed = dict(highlight.STEMMED)
    marked = highlight.MARKED["python"]
    hits = await _search(http, vectord_url, name, query_text="marshwort zephyrine dune",
                         highlight=True)
    assert {h["id"] for h in hits} == {"d0", "d1", "d2"}
    by_id = {h["id"]: h["highlight"]["text"] for h in hits}
    assert by_id["d1"] == ["<mark>Zephyrines</mark> drift over hollowed <mark>dunes</mark>; "
                           "a <mark>marshwort</mark> grows there too."]
    assert "<mark>marshworts</mark>" in by_id["d0"][0]
    assert highlight.STEMMED == stemmed  # every word known ahead: no statement
    assert highlight.MARKED["python"] == marked + 3
    # A word written since the learning is stemmed at the search, as before.
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
        {"id": "d9", "vector": unit(8, 9), "text": "Marshwortish bogbeans.",
         "language": "english"}]})
    assert status == 200, body
    hits = await _search(http, vectord_url, name, query_text="bogbean", highlight=True)
    assert [h["highlight"]["text"] for h in hits] == [["Marshwortish <mark>bogbeans</mark>."]]
    assert highlight.STEMMED["statements"] == stemmed["statements"] + 1


async def test_a_failed_learning_is_reported_and_highlights_still_work(
        vectord_url: str, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_words, "WORDS", "SELECT no_such_column FROM {items}")
    texts = [t.replace("marshwort", "fenwort") for t in TEXTS]
    name = await _loaded(http, vectord_url, "failures", texts)
    stemmed = highlight.STEMMED["statements"]
    hits = await _search(http, vectord_url, name, query_text="fenwort", highlight=True)
    assert len(hits) == 3
    assert all("<mark>fenwort" in h["highlight"]["text"][0] for h in hits), hits
    assert highlight.STEMMED["statements"] == stemmed + 1  # stemmed at the search
