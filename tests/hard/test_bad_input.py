"""Every bad input, each its own case, through the gateway and straight to the
daemon: a 4xx in the one error shape naming the field, and the corpus unchanged."""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.hard.conftest import HardStack

DIM = 384  # the local model's; the corpus fixture asserts it


def words(nbytes: int) -> str:
    """Distinct letter-only words adding up to about nbytes (a tsvector of more than 1 MB)."""
    letters = string.ascii_lowercase
    out: list[str] = []
    size, i = 0, 0
    while size < nbytes:
        n, w = i, ""
        for _ in range(5):
            n, r = divmod(n, 26)
            w += letters[r]
        out.append("q" + w)
        size += 7
        i += 1
    return " ".join(out)


def deep(n: int) -> str:
    return "[" * n + "]" * n


def vec() -> list[float]:
    return [0.1] * DIM


def item(**over: Any) -> dict[str, Any]:
    return {"id": "new1", "vector": vec(), "text": "a text", **over}


Body = Callable[[], bytes | None]


def js(obj: Any) -> Body:
    return lambda: json.dumps(obj).encode()


def raw(text: str | bytes) -> Body:
    return lambda: text if isinstance(text, bytes) else text.encode()


@dataclass
class Case:
    id: str
    daemon: str
    method: str
    path: str  # {c}: the corpus
    body: Body
    field: str | None
    status: int = 400


C = "/v1/vectors/corpora/{c}"
D = "/v1/corpora/{c}/documents"
VEC_JSON = json.dumps(vec())
UPSERT_RAW = '{"items": [{"id": "new1", "vector": ' + VEC_JSON + ', "text": %s, "metadata": %s}]}'
LONG_WORD = "w" * 2000
CJK_ID = "漢" * 512  # 1,536 bytes of UTF-8

CASES = [
    # invalid UTF-8 inside a JSON string
    Case("utf8_embed", "embedd", "POST", "/v1/embed", raw(b'{"texts":["a\xffb"]}'), "texts[0]"),
    Case("utf8_upsert_text", "vectord", "POST", C + "/items",
         raw((UPSERT_RAW % ('"a\xffb"', "{}")).encode("latin-1")), "items[0].text"),
    Case("utf8_matrix_query", "matrixd", "POST", "/v1/matrix/search",
         raw(b'{"corpora":["hard_c"],"query_text":"a\xffb"}'), "query_text"),
    # JSON nested 10,000 deep in a free-form field
    Case("deep_item_metadata", "vectord", "POST", C + "/items",
         raw(UPSERT_RAW % ('"x"', '{"a": ' + deep(10_000) + "}")), "items[0].metadata"),
    Case("deep_filter_metadata", "vectord", "POST", C + "/search",
         raw('{"mode": "keyword", "query_text": "tea", "filter": {"metadata": {"a": '
             + deep(10_000) + "}}}"), "filter.metadata"),
    Case("deep_prefer_metadata", "vectord", "POST", C + "/search",
         raw('{"mode": "hybrid", "query_text": "tea", "prefer": {"metadata": {"a": '
             + deep(100) + "}}}"), "prefer.metadata"),
    Case("deep_multi_filter", "vectord", "POST", "/v1/vectors/search",
         raw('{"corpora": ["hard_c"], "mode": "keyword", "query_text": "tea", '
             '"filter": {"metadata": {"a": ' + deep(10_000) + "}}}"), "filter.metadata"),
    # matrixd's filter and prefer are vectord's structs: the same fields named.
    Case("deep_matrix_filter", "matrixd", "POST", "/v1/matrix/search",
         raw('{"corpora": ["hard_c"], "query_text": "tea", "filter": {"metadata": {"a": '
             + deep(10_000) + "}}}"), "filter.metadata"),
    Case("deep_matrix_prefer", "matrixd", "POST", "/v1/matrix/search",
         raw('{"corpora": ["hard_c"], "query_text": "tea", "prefer": {"metadata": {"a": '
             + deep(500) + "}}}"), "prefer.metadata"),
    # a NUL character in text that would reach PostgreSQL
    Case("nul_keyword_query", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "a\x00b"}), "query_text"),
    Case("nul_lexical_query", "vectord", "POST", C + "/search",
         js({"mode": "lexical", "query_text": "a\x00b"}), "query_text"),
    Case("nul_id_prefix", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "filter": {"id_prefix": "d\x00"}}),
         "filter.id_prefix"),
    Case("nul_metadata_key", "vectord", "POST", C + "/items",
         js({"items": [item(metadata={"k\x00": 1})]}), "items[0].metadata"),
    Case("nul_metadata_value", "vectord", "POST", C + "/items",
         js({"items": [item(metadata={"k": "v\x00"})]}), "items[0].metadata.k"),
    Case("nul_filter_metadata", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "filter": {"metadata": {"type": "a\x00"}}}),
         "filter.metadata.type"),
    Case("nul_tags_any", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "filter": {"tags_any": ["a\x00"]}}),
         "filter.tags_any[0]"),
    Case("nul_tags_all", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "filter": {"tags_all": ["a\x00"]}}),
         "filter.tags_all[0]"),
    Case("nul_type", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "filter": {"type": "n\x00"}}), "filter.type"),
    Case("nul_parent_id", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "filter": {"parent_id": "p\x00"}}),
         "filter.parent_id"),
    Case("nul_item_id", "vectord", "POST", C + "/items", js({"items": [item(id="a\x00")]}),
         "items[0].id"),
    Case("nul_item_tag", "vectord", "POST", C + "/items", js({"items": [item(tags=["t\x00"])]}),
         "items[0].tags[0]"),
    Case("nul_path_id", "vectord", "GET", C + "/items/a%00b", lambda: None, "id"),
    Case("nul_ids_prefix", "vectord", "GET", C + "/ids?prefix=a%00", lambda: None, "prefix"),
    Case("nul_ids_after", "vectord", "GET", C + "/ids?after=a%00", lambda: None, "after"),
    Case("nul_delete_id", "vectord", "POST", C + "/items/delete", js({"ids": ["d\x00"]}), "ids[0]"),
    Case("nul_corpus_model", "vectord", "POST", "/v1/vectors/corpora",
         js({"name": "hard_nul", "dim": 3, "model": "m\x00"}), "model"),
    Case("nul_multi_query", "vectord", "POST", "/v1/vectors/search",
         js({"corpora": ["hard_c"], "mode": "keyword", "query_text": "a\x00"}), "query_text"),
    Case("nul_matrix_query", "matrixd", "POST", "/v1/matrix/search",
         js({"corpora": ["hard_c"], "mode": "lexical", "query_text": "a\x00b"}), "query_text"),
    # numbers that overflow SQL types: every numeric option has a range
    Case("overflow_rrf_k", "vectord", "POST", C + "/search",
         js({"mode": "hybrid", "query_text": "tea", "rrf_k": 9223372036854775807}), "rrf_k"),
    Case("overflow_bm25_k1", "vectord", "POST", C + "/search",
         js({"mode": "lexical", "query_text": "tea", "bm25_k1": 1e308}), "bm25_k1"),
    Case("overflow_bm25_b", "vectord", "POST", C + "/search",
         js({"mode": "lexical", "query_text": "tea", "bm25_b": 1e308}), "bm25_b"),
    Case("overflow_k", "vectord", "POST", C + "/search",
         js({"mode": "keyword", "query_text": "tea", "k": 9223372036854775807}), "k"),
    Case("overflow_ef_search", "vectord", "POST", C + "/search",
         js({"mode": "vector", "query_vector": vec(), "ef_search": 2**40}), "ef_search"),
    Case("overflow_candidates", "vectord", "POST", C + "/search",
         js({"mode": "hybrid", "query_text": "tea", "candidates": 2**63}), "candidates"),
    Case("overflow_field_weight", "vectord", "POST", C + "/search",
         js({"mode": "lexical", "query_text": "tea", "field_weights": {"title": 1e308}}),
         "field_weights.title"),
    Case("overflow_fusion_weight", "vectord", "POST", C + "/search",
         js({"mode": "hybrid", "query_text": "tea", "fusion": "weighted",
             "weights": {"vector": 1e308}}), "weights.vector"),
    Case("overflow_multi_rrf_k", "vectord", "POST", "/v1/vectors/search",
         js({"corpora": ["hard_c"], "mode": "hybrid", "query_text": "tea", "rrf_k": 2**63}),
         "rrf_k"),
    Case("overflow_ids_limit", "vectord", "GET", C + "/ids?limit=99999999999999999999",
         lambda: None, "limit"),
    Case("overflow_dim", "vectord", "POST", "/v1/vectors/corpora",
         js({"name": "hard_big", "dim": 2**63}), "dim"),
    Case("overflow_matrix_rrf_k", "matrixd", "POST", "/v1/matrix/search",
         js({"corpora": ["hard_c"], "query_text": "tea", "rrf_k": 9223372036854775807}), "rrf_k"),
    Case("overflow_matrix_k", "matrixd", "POST", "/v1/matrix/search",
         js({"corpora": ["hard_c"], "query_text": "tea", "k": 2**63}), "k"),
    Case("overflow_playbook_top_k", "matrixd", "POST", "/v1/matrix/search",
         js({"corpora": ["hard_c"], "query_text": "tea", "use_playbook": True,
             "playbook_top_k": 2**40}), "playbook_top_k"),
    # a text whose tsvector is over PostgreSQL's 1 MB
    Case("tsvector_upsert", "vectord", "POST", C + "/items",
         js({"items": [item(text=words(1_200_000), language="simple")]}), "items[0].text"),
    Case("tsvector_record", "matrixd", "POST", "/v1/matrix/playbooks/record",
         js({"query_text": words(1_200_000), "answer_id": "d1", "answer_corpus": "hard_c",
             "score": 1}), "query_text"),
    # an id that, with a long lexeme, would not fit a btree row
    Case("id_too_long", "vectord", "POST", C + "/items",
         js({"items": [item(id=CJK_ID, text=LONG_WORD)]}), "items[0].id"),
    # URLs over 8 KB answered in the error shape
    Case("url_too_long", "vectord", "GET", C + "/items/" + "x" * 9000, lambda: None, "url", 414),
    # matrixd: vectord's 400 about the caller's field is a 400, not a 502
    Case("matrix_vector_dim", "matrixd", "POST", "/v1/matrix/search",
         js({"corpora": ["hard_c"], "query_vector": [0.1, 0.2]}), "query_vector"),
    Case("matrix_bad_filter", "matrixd", "POST", "/v1/matrix/search",
         js({"corpora": ["hard_c"], "query_text": "tea", "filter": {"bogus": 1}}), "filter.bogus"),
    # playbooks/record names the caller's fields
    Case("record_nul_tag", "matrixd", "POST", "/v1/matrix/playbooks/record",
         js({"query_text": "q", "answer_id": "d1", "answer_corpus": "hard_c", "score": 1,
             "tags": ["t\x00"]}), "tags[0]"),
    Case("record_nul_answer_id", "matrixd", "POST", "/v1/matrix/playbooks/record",
         js({"query_text": "q", "answer_id": "d\x00", "answer_corpus": "hard_c", "score": 1}),
         "answer_id"),
    Case("record_score_range", "matrixd", "POST", "/v1/matrix/playbooks/record",
         js({"query_text": "q", "answer_id": "d1", "answer_corpus": "hard_c", "score": 2}),
         "score"),
    # documents: refused whole, naming the document's field; nothing enqueued or written
    Case("doc_nul_text", "vectord", "POST", D, js({"documents": [{"id": "a", "text": "a\x00"}]}),
         "documents[0].text"),
    Case("doc_utf8_text", "vectord", "POST", D,
         raw(b'{"documents": [{"id": "a", "text": "a\xffb"}]}'), "documents[0].text"),
    Case("doc_deep_metadata", "vectord", "POST", D,
         raw('{"documents": [{"id": "a", "text": "x", "metadata": {"a": ' + deep(10_000) + "}}]}"),
         "documents[0].metadata"),
    Case("doc_id_too_long", "vectord", "POST", D,
         js({"documents": [{"id": CJK_ID, "text": "x"}]}), "documents[0].id"),
    Case("doc_id_dots", "vectord", "POST", D, js({"documents": [{"id": "..", "text": "x"}]}),
         "documents[0].id"),
    Case("doc_blank", "vectord", "POST", D, js({"documents": [{"id": "a", "text": " "}]}),
         "documents[0].text"),
    Case("doc_twice", "vectord", "POST", D,
         js({"documents": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}),
         "documents[1].id"),
    Case("doc_language", "vectord", "POST", D,
         js({"documents": [{"id": "a", "text": "x", "language": "klingon"}]}),
         "documents[0].language"),
    Case("doc_vector_needs_none", "vectord", "POST", D,
         js({"documents": [{"id": "a", "text": "x", "vector": vec()}]}), "documents[0].vector"),
    Case("doc_vector_range", "vectord", "POST", D,
         js({"documents": [{"id": "a", "text": "x", "vector": [float("1e39")] * DIM}],
             "chunking": "none"}), "documents[0].vector"),
    Case("doc_chunk_chars", "vectord", "POST", D,
         js({"documents": [{"id": "a", "text": "x"}], "chunk_chars": 2**40}), "chunk_chars"),
    Case("doc_too_many", "vectord", "POST", D,
         js({"documents": [{"id": f"d{i}", "text": "x"} for i in range(10_001)]}), "documents"),
    Case("doc_wait", "vectord", "POST", D + "?wait=maybe",
         js({"documents": [{"id": "a", "text": "x"}]}), "wait"),
    Case("doc_delete_nul", "vectord", "POST", D + "/delete", js({"ids": ["a\x00"]}), "ids[0]"),
    Case("doc_get_nul", "vectord", "GET", D + "/a%00b", lambda: None, "id"),
    Case("task_id", "vectord", "GET", "/v1/tasks/abc", lambda: None, "task_id"),
    Case("task_id_huge", "vectord", "GET", "/v1/tasks/99999999999999999999999", lambda: None,
         "task_id"),
    Case("tasks_state", "vectord", "GET", "/v1/tasks?state=done", lambda: None, "state"),
    Case("tasks_limit", "vectord", "GET", "/v1/tasks?limit=0", lambda: None, "limit"),
    Case("tasks_corpus", "vectord", "GET", "/v1/tasks?corpus=Bad!", lambda: None, "corpus"),
    Case("item_include", "vectord", "GET", C + "/items/d1?include=embedding", lambda: None,
         "include"),
]


@pytest.mark.parametrize("via", ["gateway", "direct"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_a_4xx_naming_the_field(hard_stack: HardStack, corpus: str, case: Case,
                                             via: str) -> None:
    before = hard_stack.count(corpus), hard_stack.newest_task()
    base = hard_stack.gateway if via == "gateway" else hard_stack.urls[case.daemon]
    out = hard_stack.call(case.method, base + case.path.format(c=corpus), raw=case.body())
    hard_stack.settle(out)
    assert out.status == case.status, out.body
    assert isinstance(out.body, dict) and set(out.body) == {"error", "request_id"}, out.body
    assert out.body["error"].get("field") == case.field, out.body
    assert out.headers.get("Server") == "lakehouse"
    # nothing written, nothing enqueued to be written later
    assert (hard_stack.count(corpus), hard_stack.newest_task()) == before


@pytest.mark.parametrize("via", ["gateway", "direct"])
def test_405_says_which_methods(hard_stack: HardStack, via: str) -> None:
    base = hard_stack.gateway if via == "gateway" else hard_stack.urls["vectord"]
    out = hard_stack.call("PUT", f"{base}/v1/vectors/corpora", {})
    assert out.status == 405, out.body
    assert out.body["error"]["code"] == "method_not_allowed"
    assert set(out.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


def test_longest_id_and_longest_lexeme_fit(hard_stack: HardStack, corpus: str) -> None:
    """The limits hold together: an id of 512 bytes with a 2,046-letter word is stored and
    found (PostgreSQL leaves words of 2,047 bytes or more out of a tsvector)."""
    name = "hard_limits"
    made = hard_stack.call("POST", f"{hard_stack.gateway}/v1/vectors/corpora",
                           {"name": name, "dim": DIM, "language": "simple"})
    assert made.status == 201, made.body
    word = "z" * 2046
    it = item(id="i" * 512, text=f"{word} and {'y' * 3000} plain")
    out = hard_stack.call("POST", f"{hard_stack.gateway}{C.format(c=name)}/items", {"items": [it]})
    assert out.status == 200, out.body
    hit = hard_stack.call("POST", f"{hard_stack.gateway}{C.format(c=name)}/search",
                          {"mode": "lexical", "query_text": word})
    assert hit.status == 200, hit.body
    assert [h["id"] for h in hit.body["hits"]] == ["i" * 512]


def test_corpus_is_384_dim(hard_stack: HardStack, corpus: str) -> None:
    out = hard_stack.call("GET", f"{hard_stack.gateway}{C.format(c=corpus)}")
    assert out.body["dim"] == DIM
