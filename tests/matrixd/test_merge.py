"""Cross-corpus merging rules (internal.matrixd.merge)."""

from __future__ import annotations

from typing import Any

from internal.matrixd.merge import merge


def h(id_: str, **kw: Any) -> dict[str, Any]:
    return {"id": id_, "metadata": {"n": id_}, **kw}


def test_vector_merges_by_distance_across_corpora() -> None:
    out = merge([("a", [h("a1", distance=0.2), h("a2", distance=0.5)]),
                 ("b", [h("b1", distance=0.1), h("b2", distance=0.3)])], "vector")
    assert [x["id"] for x in out] == ["b1", "a1", "b2", "a2"]
    assert [x["corpus"] for x in out] == ["b", "a", "b", "a"]
    assert out[0]["corpus_rank"] == 1 and out[0]["merge_score"] is None
    assert out[0]["metadata"] == {"n": "b1"}


def test_lexical_ignores_raw_bm25_across_corpora() -> None:
    # b's BM25 numbers are larger only because its statistics differ: rank decides.
    out = merge([("a", [h("a1", score=2.0), h("a2", score=1.9)]),
                 ("b", [h("b1", score=30.0), h("b2", score=25.0)])], "lexical", rrf_k=60)
    assert [x["id"] for x in out][:2] in (["a1", "b1"], ["b1", "a1"])
    assert {x["id"] for x in out[2:]} == {"a2", "b2"}
    assert out[0]["merge_score"] == 1 / 61
    # tie on rank 2: relative BM25 a2 = 0.95 beats b2 = 0.83
    assert [x["id"] for x in out[2:]] == ["a2", "b2"]


def test_hybrid_uses_fused_score_then_distance() -> None:
    out = merge([("a", [h("a1", score=0.020, distance=0.4)]),
                 ("b", [h("b1", score=0.032, distance=0.6), h("b2", score=0.020, distance=0.3)])],
                "hybrid")
    assert [x["id"] for x in out] == ["b1", "b2", "a1"]


def test_keyword_ties_newest_first() -> None:
    out = merge([("a", [h("a1", updated_at="2024-01-01T00:00:00Z")]),
                 ("b", [h("b1", updated_at="2025-01-01T00:00:00Z")])], "keyword")
    assert [x["id"] for x in out] == ["b1", "a1"]
