"""`lakehouse eval` over several data sets reports their mean."""

from __future__ import annotations

import argparse

import pytest

from internal.cli.eval_cmd import _pairs, _prf
from internal.evaluation.ingest import IngestReport
from internal.evaluation.report import Report, mean_json, mean_table
from internal.evaluation.runner import ModeResult, SearchOptions, search_body


def _report(name: str, ndcg: dict[str, float]) -> Report:
    ing = IngestReport(name, "m", 10, 0, 0, 0, 10, 0, False, 0.0)
    results = [ModeResult(mode, {"ndcg@10": v, "recall@100": v, "mrr@10": v}, 1.0, 5)
               for mode, v in ndcg.items()]
    return Report(name, "dev", 10, 5, ing, 0.0, results, {})


def test_mean_counts_each_set_once() -> None:
    reports = [_report("a", {"lexical": 0.2, "hybrid": 0.5}),
               _report("b", {"lexical": 0.4, "hybrid": 0.7})]
    text = mean_table(reports)
    assert "| hybrid | 0.5000 | 0.7000 | 0.6000 | 0.6000 | 0.6000 |" in text
    assert "| lexical | 0.2000 | 0.4000 | 0.3000 |" in text
    doc = mean_json(reports)
    assert [m["ndcg@10"] for m in doc["mean"]] == [0.3, 0.6]
    assert len(doc["datasets"]) == 2


def test_failed_mode_has_no_mean() -> None:
    bad = _report("b", {})
    bad.results.append(ModeResult("lexical", {}, 1.0, 5, error="boom"))
    assert "| lexical | failed on some data set |" in mean_table([_report("a", {"lexical": 0.2}), bad])


def test_splits_pair_with_datasets() -> None:
    ns = argparse.Namespace(dataset=["x", "y"], split=["dev"], corpus=None)
    assert _pairs(ns) == [("x", "dev"), ("y", "dev")]
    ns = argparse.Namespace(dataset=["x", "y"], split=["train", "dev"], corpus=None)
    assert _pairs(ns) == [("x", "train"), ("y", "dev")]
    with pytest.raises(SystemExit):
        _pairs(argparse.Namespace(dataset=["x", "y", "z"], split=["a", "b"], corpus=None))
    with pytest.raises(SystemExit):
        _pairs(argparse.Namespace(dataset=["x", "y"], split=["a"], corpus="c"))
    assert _prf("0") == {"docs": 0}
    assert _prf("5,10,0.5") == {"docs": 5, "terms": 10, "weight": 0.5}


def test_default_hybrid_row_sends_no_fusion() -> None:
    opts = SearchOptions(hybrid={"fusion": "dbsf", "rrf_k": 30, "prf": {"docs": 0}})
    body = search_body("hybrid", "q", [0.0], opts)
    assert body["fusion"] == "dbsf" and body["rrf_k"] == 30 and body["prf"] == {"docs": 0}
    assert "fusion" not in search_body("hybrid", "q", [0.0], SearchOptions())
    body = search_body("hybrid-weighted", "q", [0.0], opts)
    assert body["fusion"] == "weighted" and "rrf_k" not in body
