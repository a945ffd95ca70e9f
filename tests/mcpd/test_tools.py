"""The tool table (I/O-free): schemas, bodies, error naming, text renderings."""

from __future__ import annotations

import msgspec
import pytest

from internal.api.matrixd import MatrixSearchRequest, RecordRequest
from internal.common.errors import InvalidArgument
from internal.common.web import decode
from internal.mcpd import render
from internal.mcpd.tools import BY_NAME, TOOLS, SearchArgs, argument_name, route_path


def test_every_tool_has_an_object_schema_and_a_useful_description() -> None:
    for tool in TOOLS:
        schema = tool.input_schema()
        assert schema["type"] == "object", tool.name
        assert schema.get("additionalProperties") is False, tool.name
        assert len(tool.description) > 80, tool.name
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), (tool.name, name)
    assert "keyword" in BY_NAME["search"].description
    assert "$defs" in BY_NAME["normalize_observations"].input_schema()


def test_search_body_is_a_valid_matrix_search_request() -> None:
    tool = BY_NAME["search"]
    args = msgspec.convert({"query": "tea", "corpora": ["a", "b"], "k": 3, "mode": "keyword",
                            "filter": {"tags_any": ["x"]}, "use_playbook": True}, SearchArgs)
    body = tool.body(args)
    # Pinned against matrixd's own request struct: the tool cannot drift from the route.
    req = msgspec.convert(body, MatrixSearchRequest)
    assert (req.query_text, req.corpora, req.k, req.mode, req.use_playbook) == ("tea", ["a", "b"], 3, "keyword", True)
    # Options not given are left for the route's defaults; the snippet is the highlight.
    assert tool.body(msgspec.convert({"query": "tea"}, SearchArgs)) == {
        "query_text": "tea", "highlight": True}
    body = tool.body(msgspec.convert({"query": "tea", "group_by": "parent",
                                      "facets": ["corpus", "tags"]}, SearchArgs))
    req = msgspec.convert(body, MatrixSearchRequest)
    assert (req.group_by, req.facets, req.highlight) == ("parent", ["corpus", "tags"], True)


def test_feedback_body_is_a_valid_record_request() -> None:
    tool = BY_NAME["record_feedback"]
    args = msgspec.convert({"query": "q", "answer_id": "7", "corpus": "docs", "score": 1}, tool.args)
    req = msgspec.convert(tool.body(args), RecordRequest)
    assert (req.query_text, req.answer_id, req.answer_corpus, req.score) == ("q", "7", "docs", 1.0)


def test_issue_17_bodies() -> None:
    def body(name: str, raw: dict[str, object]) -> object:
        tool = BY_NAME[name]
        return tool.body(msgspec.convert(raw, tool.args))

    assert body("analyze_query", {"query": "who", "now": "2023-05-08"}) == {"query_text": "who", "now": "2023-05-08"}
    assert body("smart_search", {"query": "q", "max_iterations": 2}) == {"query_text": "q", "max_iterations": 2}
    assert body("search_auto", {"query": "q", "budget_ms": 50}) == {"query_text": "q", "budget_ms": 50}
    assert body("normalize_observations", {"observations": [{"text": "I went", "speaker": "Caroline"}]}) == {
        "observations": [{"text": "I went", "speaker": "Caroline"}]}


@pytest.mark.parametrize(("raw", "field"), [
    ({"k": 3}, "query"),
    ({"query": "q", "k": "ten"}, "k"),
    ({"query": "q", "mode": "psychic"}, "mode"),
    ({"query": "q", "colour": "green"}, "colour"),
    ({"query": "q", "corpora": "docs"}, "corpora"),
])
def test_bad_arguments_name_the_argument(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        decode(msgspec.json.encode(raw), SearchArgs)
    assert caught.value.field == field


def test_route_fields_map_back_to_argument_names() -> None:
    search = BY_NAME["search"]
    assert argument_name(search, "query_text") == "query"
    assert argument_name(search, "k") == "k"
    assert argument_name(search, "filter.range.gte") == "filter.range.gte"
    assert argument_name(BY_NAME["record_feedback"], "answer_corpus") == "corpus"
    assert argument_name(BY_NAME["normalize_observations"], "observations[2].text") == "observations[2].text"
    assert argument_name(search, None) is None


def test_route_path_quotes_parameters() -> None:
    tool = BY_NAME["get_item"]
    args = msgspec.convert({"corpus": "docs", "id": "a/b c#1"}, tool.args)
    assert route_path(tool, args) == "/v1/vectors/corpora/docs/items/a%2Fb%20c%231"


def test_hits_rendering_has_rank_corpus_id_title_snippet_and_boost() -> None:
    out = {"mode": "hybrid", "took_ms": 12.5, "playbook_boosted": 1, "hits": [
        {"rank": 1, "corpus": "notes", "id": "n1", "title": "Tea", "text": "Green tea\n at 80 C " * 40,
         "boost_factor": 0.5, "matched_layers": ["vector", "lexical"]},
        {"rank": 2, "corpus": "guides", "id": "g1", "title": None, "text": "Espresso", "boost_factor": 1.0},
    ]}
    text = render.render("search", out)
    lines = text.splitlines()
    assert lines[0] == "1. [notes] n1 — Tea (feedback boost ×2.00) [matched: vector, lexical]"
    assert lines[1].startswith("   Green tea at 80 C") and len(lines[1]) <= render.SNIPPET + 3
    assert lines[2] == "2. [guides] g1"
    assert lines[-1] == "(mode hybrid; 1 boosted by feedback; 12.5 ms)"
    assert render.render("search", {"hits": []}).startswith("no hits")


def test_the_snippet_is_the_highlight_as_plain_text() -> None:
    out = {"hits": [{"rank": 1, "corpus": "wiki", "id": "a.md#0", "title": "A",
                     "text": "whole text", "highlight": {"text": [
                         "the <mark>printer</mark> &lt;b&gt;jams&lt;/b&gt;", "more"]},
                     "group": {"key": "a.md", "hits": [], "count": 3}}],
           "facets": {"corpus": {"wiki": 3}}}
    lines = render.render("search", out).splitlines()
    assert lines[1] == "   the **printer** <b>jams</b> … more"
    assert lines[2] == "   (3 hits in a.md)"
    assert lines[-1] == "(corpus: wiki 3)"


def test_other_renderings() -> None:
    assert render.render("list_corpora", {"corpora": [{"name": "a", "count": 3, "language": "auto",
                                                       "dim": 384, "model": "m"}]}) == \
        "a: 3 items, language auto, dim 384, model m"
    item = render.render("get_item", {"corpus": "a", "id": "x", "title": "T", "text": "body"})
    assert item.startswith("[a] x — T") and item.endswith("body")
    assert "added 1" in render.render("sync_now", {"added": 1, "seconds": 0.5, "errors": []})
    assert render.render("analyze_query", {"question_type": "temporal", "complexity": "low",
                                           "confidence": 0.9, "sub_queries": ["a"]}).endswith("sub-query: a")
