"""Each layer weighed by what it can see (search/weighing.py): the vector layer's weight
by the languages its model declares, the corpus's items' languages and the question's
script."""

from __future__ import annotations

import pytest

from internal.vectord.search import fusion, weighing

EN = frozenset({"en"})
MULTI = frozenset({"en", "de", "zh", "ja"})
BASE = fusion.DEFAULT_WEIGHTS


def test_a_blind_layer_weighs_less_an_english_model_over_a_chinese_corpus() -> None:
    seen = weighing.vector_seen([({"chinese": 1534}, EN)], "列出目录中的文件")
    assert seen == 0.0
    w = weighing.weights(BASE, seen)
    assert w[fusion.VECTOR] == pytest.approx(BASE[fusion.VECTOR] * weighing.FLOOR)
    assert w[fusion.LEXICAL] == BASE[fusion.LEXICAL]
    # A Chinese question over English pages: the model cannot read the question either.
    assert weighing.vector_seen([({"english": 4612}, EN)], "列出目录中的文件") == 0.0
    # A Japanese one (kana and Han) likewise.
    assert weighing.vector_seen([({"japanese": 491}, EN)], "ファイルを一覧表示する") == 0.0


def test_the_question_decides_a_question_in_a_script_the_model_reads_is_read() -> None:
    # English over Chinese pages, German over German pages: letters the model reads
    # (measured: weighing these down lost on both sets).
    assert weighing.vector_seen([({"chinese": 1534}, EN)], "list the files of a folder") == 1.0
    assert weighing.vector_seen([({"german": 925}, EN)], "Dateien auflisten") == 1.0


def test_a_model_that_reads_the_language_gets_its_weight_back() -> None:
    for held, text in (({"chinese": 1534}, "列出目录中的文件"), ({"japanese": 9}, "ファイル"),
                       ({"english": 10, "simple": 3}, "list the files")):
        seen = weighing.vector_seen([(held, MULTI)], text)
        assert seen == 1.0
        assert weighing.weights(BASE, seen) == dict(BASE)
    # A model that declares nothing is taken to read everything.
    assert weighing.vector_seen([({"chinese": 5}, None)], "文件") == 1.0


def test_what_the_layer_sees_is_weighed_by_items_and_letters() -> None:
    # Two corpora searched together, one read by a model that reads Chinese.
    assert weighing.vector_seen([({"chinese": 30}, EN), ({"chinese": 10}, MULTI)],
                                "文件") == 0.25
    # A question half in Han characters reads as half to the English model.
    assert weighing.question_seen("ls 文件", EN) == pytest.approx(2 / 4)
    assert weighing.question_seen("1234 ?!", EN) == 1.0  # no letters: nothing to miss


def test_weights_scale_the_vector_layer_only() -> None:
    w = weighing.weights({fusion.VECTOR: 0.5, fusion.LEXICAL: 0.5}, 0.5, floor=0.2)
    assert w == {fusion.VECTOR: pytest.approx(0.5 * 0.6), fusion.LEXICAL: 0.5}
    assert weighing.weights({fusion.LEXICAL: 1.0}, 0.0) == {fusion.LEXICAL: 1.0}


def test_vectord_reads_the_declared_languages_from_embedds_listing() -> None:
    from internal.vectord.model_languages import declared
    from lakehouse.wire.responses import ModelInfo, ModelsResponse

    listing = ModelsResponse(default="m", models=[
        ModelInfo(id="m", backend="local", dim=384, languages=["en"]),
        ModelInfo(id="remote", backend="openai", dim=None)])
    # A model that declares none is left out: read as reading every language.
    assert declared(listing) == {"m": ("en",)}


def test_a_question_in_another_language_than_the_pages_weighs_the_lexical_layer_down() -> None:
    # English over German pages, a model that reads both: words match nothing of theirs.
    assert weighing.lexical_seen([({"german": 925}, MULTI)], "english") == 0.0
    w = weighing.weights(BASE, 1.0, lexical=0.0)
    assert w[fusion.LEXICAL] == pytest.approx(BASE[fusion.LEXICAL] * weighing.FLOOR)
    assert w[fusion.VECTOR] == BASE[fusion.VECTOR]
    # The pages' own language, or a question not judged: the lexical layer keeps its weight.
    assert weighing.lexical_seen([({"german": 925, "simple": 4}, MULTI)], "german") == 1.0
    assert weighing.lexical_seen([({"german": 925}, MULTI)], None) == 1.0
    # The English model cannot carry the question across: BM25 stays (decision 0221).
    assert weighing.lexical_seen([({"german": 925}, EN)], "english") == 1.0
    # A mixed corpus, and a second corpus in the question's language: by items.
    assert weighing.lexical_seen([({"german": 30, "english": 10}, MULTI)],
                                 "english") == pytest.approx(0.25)
    assert weighing.lexical_seen([({"chinese": 10}, MULTI), ({"english": 30}, EN)],
                                 "english") == pytest.approx(0.75)
