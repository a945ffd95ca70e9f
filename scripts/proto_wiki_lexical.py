"""Prototype measurements behind the wiki's lexical rules (DECISIONS.md), lexical mode only.

The tldr-pages folders synced into an in-process vectord (embedded PostgreSQL in a temp
dir) with the same Syncer `lakehouse sync` runs, every vector one constant (lexical
search reads none, so nothing is embedded), then lexical hit@3 on the question sets of
tests/fixtures/wiki_questions, for the variants compared in one run:

- en over pages/common: pages' languages as before (lingua's word on the whole page,
  Danish and French among them) or settled (this branch), each with the question's
  stop words kept out of other languages (the rule) or not;
- zh over pages.zh, ja over pages.ja: Han and kana runs cut into bigrams (this branch),
  segmented by jieba (pages and questions, the bigram cut turned off), or left whole
  (the cut turned off: what PostgreSQL's parser does alone).

    .venv/bin/python scripts/proto_wiki_lexical.py            # needs jieba for its variant
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import aiohttp
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.api.responses import ModelInfo, ModelsResponse  # noqa: E402
from internal.api.vectord import Hit as VHit  # noqa: E402
from internal.api.vectord import MultiSearchRequest  # noqa: E402
from internal.clients.embed import Embedding  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common import language, logs  # noqa: E402
from internal.config import Config  # noqa: E402
from internal.syncd import pages as pages_mod  # noqa: E402
from internal.syncd import runner  # noqa: E402
from internal.syncd.pages import Source  # noqa: E402
from internal.syncd.runner import Syncer, SyncSettings  # noqa: E402
from scripts.bench_sync import start  # noqa: E402
from scripts.bench_wiki import (  # noqa: E402
    archive_or_exit,
    extract,
    hit_at_3,
    page_of,
    questions,
)
from tests.helpers import shared_dir, with_section  # noqa: E402

DIM = 8
MISSES = "--misses" in sys.argv


class ConstantEmbedder:
    """Every text one unit vector: the lexical layer reads no vector."""

    async def models(self) -> ModelsResponse:
        return ModelsResponse(default="constant",
                              models=[ModelInfo(id="constant", backend="constant", dim=DIM)])

    async def default_model(self) -> tuple[str, int]:
        return "constant", DIM

    async def embed(self, texts: list[str], input_type: Literal["query", "document"] = "document",
                    model: str | None = None) -> Embedding:
        return Embedding(model="constant", dim=DIM, truncated=[],
                         vectors=[[1.0] + [0.0] * (DIM - 1) for _ in texts])


@functools.cache
def _old_detector() -> Any:
    """lingua as pages were detected before: low accuracy, minimum relative distance 0.1,
    the languages PostgreSQL ships."""
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    langs = []
    for code in language.ISO_TO_REGCONFIG:
        if code in ("zh", "ja"):
            continue
        try:
            langs.append(Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())))
        except (AttributeError, ValueError):
            continue
    return (LanguageDetectorBuilder.from_languages(*langs).with_low_accuracy_mode()
            .with_minimum_relative_distance(0.1).build())


def old_detect(text: str) -> str:
    if len(re.findall(r"\w", text[:2000])) < 20:
        return language.SIMPLE
    found = _old_detector().detect_language_of(text[:2000])
    if found is None:
        return language.SIMPLE
    return language.ISO_TO_REGCONFIG.get(found.iso_code_639_1.name.lower(), language.SIMPLE)


def old_settle(sources: Iterable[Source], corpus_language: str | None) -> dict[str, str]:
    return {s.path: s.told or old_detect(s.body) for s in sources}


def jieba_cut(text: str) -> str:
    import jieba

    return " ".join(w for w in jieba.cut(text) if w.strip())


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def segmented(make: Callable[..., Any]) -> Callable[..., Any]:
    """page_of_source over a body segmented by jieba, stored as `simple`."""
    def page(src: Source, lang: str, max_chars: int) -> Any:
        cut = Source(path=src.path, meta=src.meta, body=jieba_cut(src.body), told=src.told,
                     verdict=src.verdict, mapped_by=src.mapped_by)
        return make(cut, language.SIMPLE, max_chars)
    return page


IDENTITY_SPLIT = """CREATE OR REPLACE FUNCTION vectord_cjk_split(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $f$ SELECT t $f$"""


async def lexical_hit3(vectord: VectordClient, corpus: str, name: str,
                       prepare: Callable[[str], str] = lambda q: q) -> tuple[float, int]:
    asked = questions(name)
    found = []
    for q in asked:
        req = MultiSearchRequest(corpora=[corpus], mode="lexical", query_text=prepare(q.text), k=3)
        res = await vectord.search_many(req, VHit)
        found.append([page_of(h.id, h.metadata) for h in res.hits])
    score = hit_at_3(found, asked)
    if MISSES:
        for pages, q in zip(found, asked, strict=True):
            if not any(p in q.pages for p in pages):
                print(f"miss {corpus}: {q.text} -> {pages}")
    return score, round(score * len(asked))


async def run(args: argparse.Namespace) -> None:
    from internal.pg import embedded
    from internal.vectord.server import make_app

    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-proto-wiki-"))
    pg = embedded.start(tmp / "pg")
    try:
        wiki = tmp / "tldr"
        extract(archive_or_exit(args.archive), wiki)
        cfg = with_section(Config(), "vectord", dsn=pg.dsn, pool_min=1, pool_max=4)
        app_runner, url = await start(make_app(cfg))
        rows: list[tuple[str, str, float, int, int]] = []
        try:
            async with aiohttp.ClientSession() as session:
                vectord = VectordClient(session, url)

                async def synced(folder: str, corpus: str) -> None:
                    s = SyncSettings(wiki_dir=wiki / folder, corpus=corpus)
                    r = await Syncer(s, vectord, ConstantEmbedder()).request_run()
                    assert not r.errors, r.errors[:3]

                n_en = len(questions("en"))
                for labels in ("before", "settled") if args.only != "cjk" else ():
                    corpus = f"en_{labels}"
                    if labels == "before":
                        with patched(runner, "settle_pages", old_settle):
                            await synced("pages/common", corpus)
                    else:
                        await synced("pages/common", corpus)
                    for rule in ("off", "on"):
                        if rule == "off":
                            with patched(language, "question_language", lambda counts: None):
                                score, hits = await lexical_hit3(vectord, corpus, "en")
                        else:
                            score, hits = await lexical_hit3(vectord, corpus, "en")
                        rows.append(("en", f"languages {labels}, stop-word rule {rule}",
                                     score, hits, n_en))
                cjk = (("zh", "pages.zh"), ("ja", "pages.ja")) if args.only != "en" else ()
                for name, folder in cjk:
                    await synced(folder, f"{name}_bigrams")
                    score, hits = await lexical_hit3(vectord, f"{name}_bigrams", name)
                    rows.append((name, "bigrams (Elasticsearch's cjk)", score, hits,
                                 len(questions(name))))
                    score, hits = await lexical_hit3(vectord, f"{name}_bigrams", name,
                                                     jieba_cut)
                    rows.append((name, "bigrams, the question's words cut by jieba first",
                                 score, hits, len(questions(name))))
                # The cut turned off in this temp database: what PostgreSQL's parser does
                # alone, and jieba's words.
                with psycopg.connect(pg.dsn, autocommit=True) as conn:
                    conn.execute(IDENTITY_SPLIT)
                for name, folder in cjk:
                    await synced(folder, f"{name}_whole")
                    score, hits = await lexical_hit3(vectord, f"{name}_whole", name)
                    rows.append((name, "runs left whole (the parser alone)", score, hits,
                                 len(questions(name))))
                    with patched(runner, "page_of_source", segmented(pages_mod.page_of_source)):
                        await synced(folder, f"{name}_jieba")
                    score, hits = await lexical_hit3(vectord, f"{name}_jieba", name, jieba_cut)
                    rows.append((name, "jieba 0.42.1 words (pages and questions)", score, hits,
                                 len(questions(name))))
        finally:
            await app_runner.cleanup()
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| questions | variant | lexical hit@3 |")
    print("|---|---|---:|")
    for name, variant, score, hits, n in rows:
        print(f"| {name} | {variant} | {score:.3f} ({hits}/{n}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path,
                        default=shared_dir() / "corpora" / "tldr-pages.tar.gz")
    parser.add_argument("--misses", action="store_true", help="print the questions missed")
    parser.add_argument("--only", default="", help="en or cjk: one part only")
    args = parser.parse_args()
    logs.configure("warning", "console")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
