"""A new corpus's embedding model: the default (MiniLM) for English, the multilingual model
for pages in a language MiniLM does not declare, the one asked for with `--model`; an
existing corpus keeps its model (a run asking for another fails, naming `reembed`).

The choice as a pure function (lakehouse.wire.models.model_for), then real syncs of small
wikis from the tldr fixture through vectord and embedd.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import aiohttp

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.embedd.catalog import E5_ID, E5_LANGUAGES
from internal.embedd.local import MODEL_ID as MINILM
from internal.syncd.runner import Syncer, SyncSettings
from lakehouse.wire.models import model_for
from lakehouse.wire.responses import ModelInfo, ModelsResponse
from tests.sync.conftest import TLDR

LISTING = ModelsResponse(default=MINILM, models=[
    ModelInfo(id=MINILM, backend="local", dim=384, languages=["en"]),
    ModelInfo(id="all-MiniLM-L6-v2", backend="local", dim=384, superseded_by=MINILM,
              languages=["en"]),
    ModelInfo(id=E5_ID, backend="local", dim=384, languages=list(E5_LANGUAGES)),
])


def test_the_default_model_keeps_english_and_unknown_languages() -> None:
    for languages in (None, "", [], "en", ["en"], "EN", "xx", ["xx"]):
        assert model_for(LISTING, languages) == MINILM, languages


def test_a_language_the_default_does_not_declare_takes_the_model_that_does() -> None:
    for languages in ("de", ["zh"], ["en", "de"], ["ja", "en", "zh"], ["de", "xx"]):
        assert model_for(LISTING, languages) == E5_ID, languages


def test_a_remote_default_whose_languages_are_unknown_is_kept() -> None:
    remote = ModelsResponse(default="nomic-embed-text", models=[
        ModelInfo(id="nomic-embed-text", backend="ollama", dim=None), *LISTING.models])
    assert model_for(remote, "de") == "nomic-embed-text"


def wiki(tmp: Path, folder: str, n: int) -> Path:
    root = tmp / folder.replace("/", "_")
    root.mkdir()
    for page in sorted((TLDR / folder).glob("*.md"))[:n]:
        shutil.copy(page, root / page.name)
    return root


async def model_of_sync(root: Path, corpus: str, session: aiohttp.ClientSession,
                        vectord_url: str, embedd_url: str, model: str | None = None
                        ) -> tuple[str | None, list[str]]:
    vectord = VectordClient(session, vectord_url)
    run = await Syncer(SyncSettings(wiki_dir=root, corpus=corpus, batch_size=32, model=model),
                       vectord, EmbedClient(session, embedd_url)).request_run()
    corpus_model = (await vectord.get_corpus(corpus)).model
    return corpus_model, [e.error for e in run.errors]


async def test_syncs_choose_by_the_pages_language_and_keep_a_corpus_model(
        tmp_path: Path, corpus: str, session: aiohttp.ClientSession, vectord_url: str,
        embedd_url: str) -> None:
    german, english = wiki(tmp_path, "pages.de/common", 12), wiki(tmp_path, "pages/common", 12)
    assert await model_of_sync(german, corpus, session, vectord_url, embedd_url) == (E5_ID, [])
    assert await model_of_sync(english, corpus + "_en", session, vectord_url,
                               embedd_url) == (MINILM, [])
    # Asked for: the German pages on MiniLM; then an existing corpus is not moved by a
    # run that asks for another model.
    assert await model_of_sync(german, corpus + "_asked", session, vectord_url, embedd_url,
                               MINILM) == (MINILM, [])
    model, errors = await model_of_sync(german, corpus, session, vectord_url, embedd_url,
                                        MINILM)
    assert model == E5_ID and len(errors) == 1 and "lakehouse reembed" in errors[0], errors
