"""/openapi.json carries the patterns, ranges and limits the daemons enforce."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from internal.api.matrixd import MatrixSearchRequest, RecordRequest, SmartSearchRequest
from internal.api.validate import NAME_RE
from internal.api.vectord import CreateCorpus, SearchRequest
from internal.common.web import decode
from internal.config import Config
from internal.gateway import openapi
from tests.helpers import with_section


def _prop(doc: dict[str, Any], struct: str, name: str) -> dict[str, Any]:
    schema: dict[str, Any] = doc["components"]["schemas"][struct]["properties"][name]
    branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
    return branches[0]


def test_document_states_the_limits() -> None:
    cfg = with_section(Config(), "vectord", max_batch=500)
    doc = openapi.build(secured=False, cfg=cfg)
    assert _prop(doc, "CreateCorpus", "name")["pattern"] == NAME_RE.pattern
    assert (_prop(doc, "CreateCorpus", "dim")["minimum"], _prop(doc, "CreateCorpus", "dim")["maximum"]) == (1, 2000)
    for field in ("k", "ef_search", "candidates"):
        got = _prop(doc, "SearchRequest", field)
        assert (got["minimum"], got["maximum"]) == (1, 1000), field
    for struct in ("SearchRequest", "MatrixSearchRequest", "SmartSearchRequest"):
        assert _prop(doc, struct, "rrf_k")["maximum"] == 100_000, struct  # one range
    assert (_prop(doc, "SearchRequest", "bm25_b")["minimum"], _prop(doc, "SearchRequest", "bm25_b")["maximum"]) == (0, 1)
    assert _prop(doc, "SearchRequest", "bm25_k1")["maximum"] == 100
    assert _prop(doc, "SearchRequest", "query_text")["maxLength"] == 16384
    assert _prop(doc, "Item", "id")["maxLength"] == 512
    assert _prop(doc, "UpsertRequest", "items")["maxItems"] == 500  # the configured max_batch
    assert _prop(doc, "EmbedRequest", "texts")["maxItems"] == 256
    assert _prop(doc, "DeleteItems", "ids")["maxItems"] == 10_000
    assert _prop(doc, "MatrixSearchRequest", "corpora")["maxItems"] == 64
    score = _prop(doc, "RecordRequest", "score")
    assert (score["minimum"], score["maximum"]) == (-1, 1)  # negative feedback
    ids = doc["paths"]["/v1/vectors/corpora/{name}/ids"]["get"]["parameters"]
    assert {p["name"]: p["schema"].get("pattern") for p in ids if p["in"] == "path"} == {
        "name": NAME_RE.pattern}
    assert [p["schema"]["maximum"] for p in ids if p["name"] == "limit"] == [10_000]


@pytest.mark.parametrize(("struct", "body", "field"), [
    (SearchRequest, {"k": 1001}, "k"),
    (SearchRequest, {"k": 0}, "k"),
    (SearchRequest, {"ef_search": 1001}, "ef_search"),
    (SearchRequest, {"bm25_b": 1.5}, "bm25_b"),
    (SearchRequest, {"rrf_k": 100_001}, "rrf_k"),
    (SearchRequest, {"field_weights": {"text": -1}}, "field_weights.text"),
    (CreateCorpus, {"name": "Bad", "dim": 3}, "name"),
    (CreateCorpus, {"name": "ok", "dim": 2001}, "dim"),
    (MatrixSearchRequest, {"corpora": ["a"], "per_corpus_k": 5000}, "per_corpus_k"),
    (MatrixSearchRequest, {"corpora": []}, "corpora"),
    (SmartSearchRequest, {"query_text": "q", "rrf_k": 100_001}, "rrf_k"),
    (SmartSearchRequest, {"query_text": "q", "candidates": 0}, "candidates"),
    (RecordRequest, {"query_text": "q", "answer_id": "", "answer_corpus": "c", "score": 1},
     "answer_id"),
])
def test_documented_limits_are_enforced(struct: type, body: dict[str, Any], field: str) -> None:
    """What the document says is what decoding refuses (400 naming the field)."""
    from internal.common.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        decode(msgspec.json.encode(body), struct)
    assert err.value.field == field
