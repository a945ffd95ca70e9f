"""matrixd's side of the merge (internal.matrixd.merge): vectord ranks, matrixd annotates."""

from __future__ import annotations

from typing import Any

import pytest

from internal.matrixd.merge import annotate, ranking_of


def h(id_: str, corpus: str, **kw: Any) -> dict[str, Any]:
    return {"id": id_, "corpus": corpus, "metadata": {"n": id_}, **kw}


def test_order_kept_and_corpus_rank_counted_per_corpus() -> None:
    merged = [h("b1", "b", distance=0.1, merge_distance=0.1),
              h("a1", "a", distance=0.2, merge_distance=0.2),
              h("b2", "b", distance=0.3, merge_distance=0.3)]
    out = annotate(merged, "vector")
    assert [x["id"] for x in out] == ["b1", "a1", "b2"]
    assert [x["corpus_rank"] for x in out] == [1, 1, 2]
    assert all(x["merge_score"] is None for x in out)
    assert out[0]["metadata"] == {"n": "b1"} and "corpus_rank" not in merged[0]


def test_score_modes_keep_vectord_merge_score() -> None:
    out = annotate([h("a1", "a", score=2.0, merge_score=6.0), h("b1", "b", score=5.0)],
                   "lexical")
    assert [x["merge_score"] for x in out] == [6.0, 5.0]


def test_keyword_gets_rank_based_merge_score() -> None:
    out = annotate([h("a1", "a"), h("b1", "b")], "keyword", rrf_k=60)
    assert [x["merge_score"] for x in out] == [1 / 61, 1 / 62]


def test_modes() -> None:
    assert ranking_of("vector") == "distance" and ranking_of("hybrid") == "score"
    with pytest.raises(ValueError):
        annotate([], "nope")
