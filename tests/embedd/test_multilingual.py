"""The multilingual model (multilingual-e5-small) through the stack: embedd lists it with
its languages, a German corpus on it answers a German and an English question, a corpus on
MiniLM and one on it are searched together (the question embedded once per model), and a
MiniLM corpus moves to it online, by `reembed`, while searches run.

Real embedd (the session's: the model opens at its first text, once), vectord with that
embedd (its re-embedder) and matrixd; the pages are the tldr fixture wiki's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from internal.config import Config
from internal.embedd.catalog import E5_ID
from internal.embedd.local import MODEL_ID as MINILM
from internal.matrixd.server import make_app as make_matrixd
from internal.vectord.server import make_app as make_vectord
from tests.helpers import FIXTURES, serve, url_of, with_section
from tests.vectord.vdata import call, unique

C = "/v1/vectors/corpora"
WIKI = FIXTURES / "tldr"


@dataclass
class Stack:
    embedd: str
    vectord: str
    matrixd: str
    german: str  # pages.de on the multilingual model
    english: str  # pages/common on MiniLM


def pages(folder: str) -> list[tuple[str, str]]:
    root = WIKI / folder
    return [(p.relative_to(root).as_posix(), p.read_text()) for p in sorted(root.rglob("*.md"))]


async def corpus(http: aiohttp.ClientSession, s: Stack, folder: str, model: str | None,
                 language: str) -> str:
    """A corpus of folder's pages embedded (as documents) by model through embedd."""
    docs = pages(folder)
    status, e = await call(http, "POST", f"{s.embedd}/v1/embed",
                           {"texts": [t for _, t in docs], "model": model})
    assert status == 200, e
    name = unique("ml")
    status, out = await call(http, "POST", f"{s.vectord}{C}", {
        "name": name, "dim": e["dim"], "model": e["model"], "language": language})
    assert status == 201, out
    status, out = await call(http, "POST", f"{s.vectord}{C}/{name}/items", {
        "items": [{"id": i, "vector": v, "text": t}
                  for (i, t), v in zip(docs, e["vectors"], strict=True)], "model": e["model"]})
    assert status == 200, out
    return name


@pytest.fixture(scope="module")
async def stack(base_cfg: Config, embedd_url: str) -> AsyncIterator[Stack]:
    vectord = await serve(make_vectord(with_section(base_cfg, "vectord",
                                                    embedd_url=(embedd_url,))))
    matrixd = await serve(make_matrixd(with_section(
        base_cfg, "matrixd", vectord_url=url_of(vectord), embedd_url=embedd_url,
        playbook_corpus=unique("pb"))))
    s = Stack(embedd_url, url_of(vectord), url_of(matrixd), "", "")
    async with aiohttp.ClientSession() as http:
        s.german = await corpus(http, s, "pages.de", E5_ID, "de")
        s.english = await corpus(http, s, "pages", None, "en")
        yield s
        for name in (s.german, s.english):
            await call(http, "DELETE", f"{s.vectord}{C}/{name}")
    await matrixd.close()
    await vectord.close()


async def search(http: aiohttp.ClientSession, s: Stack, question: str, corpora: list[str],
                 mode: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"query_text": question, "corpora": corpora, "k": 5}
    if mode:
        body["mode"] = mode
    status, out = await call(http, "POST", f"{s.matrixd}/v1/matrix/search", body)
    assert status == 200, out
    return out


async def test_embedd_lists_each_model_with_its_dimension_and_languages(
        stack: Stack, http: aiohttp.ClientSession) -> None:
    status, out = await call(http, "GET", f"{stack.embedd}/v1/embed/models")
    assert status == 200, out
    models = {m["id"]: m for m in out["models"]}
    assert out["default"] == MINILM
    assert models[MINILM]["languages"] == ["en"] and models[MINILM]["dim"] == 384
    e5 = models[E5_ID]
    assert e5["dim"] == 384 and e5["backend"] == "local" and "superseded_by" not in e5
    assert {"en", "de", "zh", "ja", "fr", "ru"} <= set(e5["languages"])


@pytest.mark.parametrize("question", [
    "Wie zeige ich das aktuelle Wetter im Terminal an?",
    "show the current weather in the terminal",
])
async def test_a_german_corpus_on_the_multilingual_model_answers(
        stack: Stack, http: aiohttp.ClientSession, question: str) -> None:
    """German and English questions alike find the German page by meaning (the vectors
    alone, and the default search); each hit says its language."""
    for mode in ("vector", None):
        out = await search(http, stack, question, [stack.german], mode)
        ids = [h["id"] for h in out["hits"][:3]]
        assert "common/ansiweather.md" in ids, (mode, ids)
        assert {h["language"] for h in out["hits"]} == {"german"}


async def test_corpora_of_both_models_are_searched_together(
        stack: Stack, http: aiohttp.ClientSession) -> None:
    """The question is embedded once per model; each corpus is searched with its own."""
    out = await search(http, stack, "encrypt a file", [stack.english, stack.german])
    assert out["skipped_corpora"] == [], out["skipped_corpora"]
    by_corpus = {h["corpus"] for h in out["hits"]}
    assert by_corpus == {stack.english, stack.german}, out["hits"]
    german = [h["id"] for h in out["hits"] if h["corpus"] == stack.german]
    # age: "Dateiverschlüsselungswerkzeug"; ansible-vault: "verschlüsselt ... Dateien"
    assert {"common/age.md", "common/ansible-vault.md"} & set(german), german


async def test_a_minilm_corpus_moves_to_the_multilingual_model_online(
        stack: Stack, http: aiohttp.ClientSession) -> None:
    """`reembed` to the multilingual model: searches answer throughout (MiniLM's vectors
    until one transaction switches), and the German question is answered after."""
    name = await corpus(http, stack, "pages.de", None, "de")
    stop = asyncio.Event()
    answers: list[int] = []
    errors: list[Any] = []

    async def searcher() -> None:
        while not stop.is_set():
            status, body = await call(http, "POST", f"{stack.matrixd}/v1/matrix/search",
                                      {"query_text": "Wetter im Terminal", "corpora": [name],
                                       "k": 5})
            answers.append(status)
            if status != 200:
                errors.append(body)
            await asyncio.sleep(0.02)

    task = asyncio.create_task(searcher())
    try:
        status, out = await call(http, "POST", f"{stack.vectord}{C}/{name}/reembed",
                                 {"model": E5_ID})
        assert status == 202, out
        for _ in range(1200):
            status, c = await call(http, "GET", f"{stack.vectord}{C}/{name}")
            if c["model"] == E5_ID:
                break
            await asyncio.sleep(0.1)
        assert c["model"] == E5_ID and "reembed" not in c, c
        await asyncio.sleep(0.3)
    finally:
        stop.set()
        await task
        await_delete = call(http, "DELETE", f"{stack.vectord}{C}/{name}")
    assert len(answers) > 3 and set(answers) == {200}, errors
    out = await search(http, stack, "show the current weather in the terminal", [name],
                       "vector")
    assert "common/ansiweather.md" in [h["id"] for h in out["hits"][:3]]
    await await_delete
