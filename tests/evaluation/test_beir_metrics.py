"""BEIR loading and the metrics wrapper (ir-measures does the arithmetic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from internal.evaluation import beir
from internal.evaluation.metrics import evaluate


def write_dataset(root: Path, split: str = "dev") -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "Wings", "text": "lift on wings", "metadata": {"author": "x"}},
            {"_id": "d2", "text": "drag"}]
    queries = [{"_id": "q1", "text": "lift"}, {"_id": "q2", "text": "drag"}, {"_id": "q3", "text": "unjudged"}]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\n")
    return root


def test_load_reads_the_named_split_and_only_judged_queries(tmp_path: Path) -> None:
    ds = beir.load(write_dataset(tmp_path / "Tiny-Set", "fold1"), "fold1")
    assert ds.name == "Tiny-Set" and ds.split == "fold1"
    assert [d.id for d in ds.docs] == ["d1", "d2"]
    assert ds.docs[0].title == "Wings" and ds.docs[0].metadata == {"author": "x"}
    assert ds.docs[1].title == ""
    assert ds.queries == {"q1": "lift", "q2": "drag"}
    assert ds.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1}}
    assert beir.corpus_name(ds) == "eval_tiny_set"


def test_missing_split_and_bad_rows_are_named(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "ds")
    with pytest.raises(beir.DatasetError, match=r"qrels/test\.tsv: not found"):
        beir.load(root, "test")
    with pytest.raises(beir.DatasetError, match="split"):
        beir.load(root, "../dev")
    (root / "qrels" / "bad.tsv").write_text("q1\td1\tyes\n")
    with pytest.raises(beir.DatasetError, match=r"bad\.tsv:1"):
        beir.load(root, "bad")


def test_corpus_name_follows_vectord_rule() -> None:
    ds = beir.Dataset(name="123 Data!", split="x", docs=[], queries={}, qrels={})
    assert beir.corpus_name(ds) == "eval_d123_data"


def test_metrics_use_rank_order_and_count_missing_queries_as_zero() -> None:
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d9": 1}}
    perfect = evaluate({"q1": ["d1", "d2"], "q2": ["d9"]}, qrels)
    assert perfect == pytest.approx({"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0})
    # q2 retrieved nothing: it counts as 0, not left out; q1 has its hit second.
    half = evaluate({"q1": ["d2", "d1"]}, qrels)
    assert half["mrr@10"] == pytest.approx(0.25)
    assert half["recall@100"] == pytest.approx(0.5)
    assert 0 < half["ndcg@10"] < 0.5


def test_vector_cache_round_trip_and_model_check(tmp_path: Path) -> None:
    from internal.evaluation.ingest import VectorCache

    path = tmp_path / "c.npz"
    cache = VectorCache(path, "model-a")
    cache.put("hello", [0.5, 0.25])
    cache.save()
    again = VectorCache(path, "model-a")
    assert again.get("hello") == [0.5, 0.25] and again.get("other") is None
    assert VectorCache(path, "model-b").get("hello") is None  # another model's vectors never serve


def test_a_cache_of_other_numerics_is_not_read(tmp_path: Path) -> None:
    """The same model id with other numerics (a new build of its weights) gives another
    probe vector: the file's vectors are stale and never serve."""
    from internal.evaluation.ingest import VectorCache

    path = tmp_path / "c.npz"
    cache = VectorCache(path, "model-a", [0.6, 0.8])
    cache.put("hello", [0.5, 0.25])
    cache.save()
    assert VectorCache(path, "model-a", [0.6, 0.8]).get("hello") == [0.5, 0.25]
    assert VectorCache(path, "model-a", [0.8, 0.6]).get("hello") is None
    cache = VectorCache(path, "model-a")  # a file written without a probe
    cache.put("other", [1.0, 0.0])
    cache.save()
    assert VectorCache(path, "model-a", [0.6, 0.8]).get("hello") is None



def test_search_bodies_per_mode() -> None:
    from internal.evaluation.runner import SearchOptions, search_body

    opts = SearchOptions(hybrid={"rrf_k": 20, "weights": {"vector": 1.0}, "candidates": 50})
    assert search_body("vector", "q", [1.0], opts) == {"mode": "vector", "k": 100, "query_vector": [1.0]}
    assert search_body("lexical", "q", [1.0], opts) == {"mode": "lexical", "k": 100, "query_text": "q"}
    rrf = search_body("hybrid-rrf", "q", [1.0], opts)
    assert rrf["fusion"] == "rrf" and rrf["rrf_k"] == 20 and "weights" not in rrf
    dbsf = search_body("hybrid-dbsf", "q", [1.0], opts)
    assert dbsf["weights"] == {"vector": 1.0} and "rrf_k" not in dbsf and dbsf["candidates"] == 50
