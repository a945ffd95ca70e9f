"""Chinese and Japanese items through vectord's real routes and PostgreSQL: stored under
their own configurations, a word found inside a sentence (character bigrams), the same
by both lexical engines, and marked in highlights."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import psycopg
import pytest

from internal.config import Config
from internal.vectord.lexical import cjk
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"

# tldr pages' lines: words with no space around them, Latin commands among them.
ITEMS = [
    ("zh1", "提取一个已存在的 7z 文件，并保持原来的目录结构。"),
    ("zh2", "将（压缩的）存档文件解压缩到目标目录中，使用 tar 命令。"),
    ("zh3", "修改文件或目录的访问权限，例如授予所有者执行文件的权限。"),
    ("ja1", "ディレクトリツリー下のファイルやディレクトリを再帰的に検索します。"),
    ("ja2", "ファイル操作のための汎用プログラミング言語です。awk を使います。"),
    ("en1", "Extract an archive file into the current directory with tar."),
]
SPLITS = ["从存档文件中提取与模式匹配的文件。ｔａｒ「文件」", "カタカナとひらがなの文。x 中 y",
          "no cjk here at all", "漢字", "全角ＡＢＣ１２３と半角"]


async def _search(http: aiohttp.ClientSession, base: str, name: str, **body: Any
                  ) -> dict[str, Any]:
    status, out = await call(http, "POST", f"{base}{M}", {"corpora": [name], **body})
    assert status == 200, out
    return out


@pytest.fixture(scope="module")
async def sql_engine(base_cfg: Config) -> AsyncIterator[str]:
    from internal.vectord.server import make_app

    server = await serve(make_app(with_section(base_cfg, "vectord", lexical_engine="sql")))
    yield url_of(server)
    await server.close()


async def test_pythons_bigrams_are_postgresqls(pg_dsn: str, vectord_url: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        for text in SPLITS:
            row = conn.execute(
                "SELECT array_agg(x.lexeme), array_agg(cardinality(x.positions)) "
                "FROM unnest(to_tsvector('chinese', vectord_cjk_split(%s))) x", (text,)
            ).fetchone()
            assert row is not None
            sql = Counter(dict(zip(row[0] or [], row[1] or [], strict=True)))
            py = Counter(lexeme for lexeme, _, _ in cjk.bigrams(text))
            assert {t: n for t, n in sql.items() if cjk.has_cjk(t)} == py, text
            for lexeme, s, e in cjk.bigrams(text):  # positions point at the lexeme
                assert (cjk.folded(text) or "")[s:e] == lexeme


async def test_a_word_inside_a_sentence_is_found_and_marked(
        vectord_url: str, sql_engine: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, dim=8, language="auto")
    items = [{"id": i, "vector": unit(8, n), "text": t} for n, (i, t) in enumerate(ITEMS)]
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": items})
    assert status == 200, body
    for item_id, want in (("zh1", "chinese"), ("zh2", "chinese"), ("ja1", "japanese"),
                          ("en1", "english")):
        status, got = await call(http, "GET", f"{vectord_url}{C}/{name}/items/{item_id}")
        assert status == 200 and got["language"] == want, (item_id, got)
    for question, first in (("如何提取文件", "zh1"), ("解压缩", "zh2"), ("访问权限", "zh3"),
                            ("再帰的に検索", "ja1"), ("プログラミング言語", "ja2")):
        q = {"mode": "lexical", "query_text": question, "k": 3,
             "highlight": {"pre": "[", "post": "]", "fields": ["text"]}}
        memory = await _search(http, vectord_url, name, **q)
        sql = await _search(http, sql_engine, name, **q)
        assert memory["hits"] and memory["hits"][0]["id"] == first, (question, memory["hits"])
        assert ([(h["id"], h["score"], h["highlight"]) for h in memory["hits"]]
                == [(h["id"], h["score"], h["highlight"]) for h in sql["hits"]]), question
        top = memory["hits"][0]
        assert top["highlight_kind"] == {"text": "lexical"}, top
    marked = (await _search(http, vectord_url, name, mode="lexical", query_text="再帰的に検索",
                            k=1, highlight={"pre": "[", "post": "]"}))["hits"][0]
    assert "[再帰的に検索]" in marked["highlight"]["text"][0], marked
    # A Latin word in a Chinese item is found and marked as any other.
    tar = await _search(http, vectord_url, name, mode="lexical", query_text="tar 解压缩", k=1,
                        highlight={"pre": "[", "post": "]"})
    assert tar["hits"][0]["id"] == "zh2"
    assert "[tar]" in tar["hits"][0]["highlight"]["text"][0]
    assert "[解压缩]" in tar["hits"][0]["highlight"]["text"][0]
