"""Property-based requests against the running stack: no answer >= 500 but the documented
502/503/504. Bodies are drawn from /openapi.json's own schemas (so the document
is exercised too) and as arbitrary JSON; corpus names are the stack's real ones half the
time, so requests get past "not found" into the search and write paths."""

from __future__ import annotations

import json
import os
import urllib.parse
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hard.conftest import HardStack

EXAMPLES = int(os.environ.get("LAKEHOUSE_PROPERTY_EXAMPLES", "20"))
DOCUMENTED_5XX = {502, 503, 504}
REAL = "hard_prop"
DIM = 384
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

# (method, OpenAPI path) of the routes drawn from; DELETE of a corpus is left out (it
# would drop the corpus the other examples use).
ROUTES = [
    ("post", "/v1/embed"),
    ("post", "/v1/vectors/corpora"),
    ("post", "/v1/vectors/corpora/{name}/items"),
    ("post", "/v1/vectors/corpora/{name}/items/delete"),
    ("post", "/v1/vectors/corpora/{name}/search"),
    ("post", "/v1/vectors/search"),
    ("post", "/v1/matrix/search"),
    ("post", "/v1/matrix/answer"),
    ("post", "/v1/matrix/answer/feedback"),
    ("post", "/v1/matrix/playbooks/record"),
    ("post", "/v1/matrix/relevance"),
    ("get", "/v1/vectors/corpora/{name}/ids"),
    ("get", "/v1/vectors/corpora/{name}/items/{id}"),
    ("delete", "/v1/vectors/corpora/{name}/items/{id}"),
    ("post", "/v1/corpora/{name}/documents"),
    ("get", "/v1/corpora/{name}/documents"),
    ("post", "/v1/corpora/{name}/documents/delete"),
    ("get", "/v1/corpora/{name}/documents/{id}"),
    ("delete", "/v1/corpora/{name}/documents/{id}"),
    ("get", "/v1/tasks"),
    ("get", "/v1/tasks/{task_id}"),
]


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for a JSON Schema of the subset msgspec emits (refs inlined first).

    Hand-written: hypothesis-jsonschema 0.23 uses Hypothesis internals that 6.1xx removed.
    Sizes are kept small (at most 6 items, 40 characters) so examples stay cheap.
    """
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        return st.integers(lo if lo is not None else -(2**63), hi if hi is not None else 2**63)
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"),
                         allow_nan=False, allow_infinity=False)
    if kind == "string":
        if schema.get("format") == "date-time":
            return st.datetimes().map(lambda d: d.isoformat() + "Z")
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        lo = schema.get("minLength", 0)
        return st.text(min_size=lo, max_size=min(schema.get("maxLength", 40), lo + 40))
    if kind == "array":
        lo = schema.get("minItems", 0)
        hi = min(schema.get("maxItems", lo + 6), lo + 6)
        return st.lists(from_schema(schema.get("items", {})), min_size=lo, max_size=hi)
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        if not props:
            values = from_schema(schema["additionalProperties"]) if isinstance(
                schema.get("additionalProperties"), dict) else JSON
            return st.dictionaries(st.text(max_size=12), values, max_size=4)
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in props.items() if k in required},
            optional={k: from_schema(v) for k, v in props.items() if k not in required})
    return JSON  # no type: anything


def _inline(node: Any, components: dict[str, Any], depth: int = 0) -> Any:
    """The schema with every local $ref replaced by its target (no recursion in ours)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and depth < 20:
            return _inline(components[ref.rsplit("/", 1)[1]], components, depth + 1)
        return {k: _inline(v, components, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, components, depth) for v in node]
    return node


@pytest.fixture(scope="module")
def document(hard_stack: HardStack) -> dict[str, Any]:
    out = hard_stack.call("GET", f"{hard_stack.gateway}/openapi.json", token=None)
    assert out.status == 200
    doc: dict[str, Any] = out.body
    return doc


@pytest.fixture(scope="module")
def real_corpus(hard_stack: HardStack) -> str:
    texts = ["a wing in a slipstream", "heat transfer in a boundary layer"]
    emb = hard_stack.call("POST", f"{hard_stack.gateway}/v1/embed", {"texts": texts})
    assert emb.status == 200 and emb.body["dim"] == DIM
    made = hard_stack.call("POST", f"{hard_stack.gateway}/v1/vectors/corpora",
                           {"name": REAL, "dim": DIM})
    assert made.status == 201, made.body
    items = [{"id": f"p{i}", "vector": v, "text": t, "tags": ["x"], "metadata": {"type": "a"}}
             for i, (v, t) in enumerate(zip(emb.body["vectors"], texts, strict=True))]
    up = hard_stack.call("POST", f"{hard_stack.gateway}/v1/vectors/corpora/{REAL}/items",
                         {"items": items})
    assert up.status == 200, up.body
    return REAL


def _realistic(body: Any, data: st.DataObject) -> Any:
    """Point a drawn body at the real corpus and give its vectors the corpus's dimension."""
    if not isinstance(body, dict) or not data.draw(st.booleans(), label="real names"):
        return body
    vector = [data.draw(st.floats(-1, 1), label="v0")] + [0.05] * (DIM - 1)
    if "corpora" in body:
        body["corpora"] = [REAL]
    if "answer_corpus" in body:
        body["answer_corpus"] = REAL
    if "query_vector" in body:
        body["query_vector"] = vector
    for it in body.get("items") or []:
        if isinstance(it, dict):
            it["vector"] = vector
    for doc in body.get("documents") or []:
        if isinstance(doc, dict) and "vector" in doc:
            doc["vector"] = vector
    return body


def _state(stack: HardStack, method: str) -> tuple[int, int | None] | None:
    """What a refused write leaves as it was: the real corpus's items, the newest task."""
    return None if method == "get" else (stack.count(REAL), stack.newest_task())


def _check(stack: HardStack, method: str, url: str, status: int, body: Any,
           before: tuple[int, int | None] | None) -> None:
    log = os.environ.get("LAKEHOUSE_PROPERTY_LOG")
    if log:  # to see what the examples reach: status and error code per request
        code = body.get("error", {}).get("code") if isinstance(body, dict) else None
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{method} {url.split('?')[0][-60:]} {status} {code}\n")
    where = f"{method.upper()} {url} -> {status}: {str(body)[:500]}"
    assert status < 500 or status in DOCUMENTED_5XX, where
    if status >= 400:
        assert isinstance(body, dict) and set(body) == {"error", "request_id"}, where
    if isinstance(body, str) and body.startswith("event: "):  # a streamed answer
        assert '"code":"internal"' not in body, where
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        for r in body["results"]:  # a multi-search's per-corpus entries
            assert r.get("status", 200) < 500 or r["status"] in DOCUMENTED_5XX, where
    if before is not None and status >= 400:  # refused: nothing written, nothing enqueued
        assert _state(stack, method) == before, where


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_schema_drawn_requests_never_5xx(hard_stack: HardStack, document: dict[str, Any],
                                         real_corpus: str, method: str, path: str) -> None:
    op = document["paths"][path][method]
    components = document["components"]["schemas"]
    body_schema = None
    if "requestBody" in op:
        body_schema = _inline(op["requestBody"]["content"]["application/json"]["schema"],
                              components)
    params = {p["name"]: p for p in op.get("parameters", [])}

    @SETTINGS
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        url_path = path
        query: dict[str, Any] = {}
        for name, p in params.items():
            value = data.draw(from_schema(p["schema"]), label=name)
            if name == "name" and data.draw(st.booleans(), label="real corpus"):
                value = real_corpus
            if p["in"] == "path":
                url_path = url_path.replace("{" + name + "}", urllib.parse.quote(str(value), safe=""))
            elif data.draw(st.booleans(), label=f"send {name}"):
                query[name] = value
        url = hard_stack.gateway + url_path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        body = None
        if body_schema is not None:
            body = _realistic(data.draw(from_schema(body_schema), label="body"), data)
        before = _state(hard_stack, method)
        out = hard_stack.call(method.upper(), url, body)
        hard_stack.settle(out)
        _check(hard_stack, method, url, out.status, out.body, before)

    run()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20)
KEYS = ["corpora", "query_text", "query_vector", "k", "mode", "filter", "prefer", "items",
        "texts", "rrf_k", "bm25_k1", "weights", "candidates", "fusion", "language", "score",
        "answer_id", "answer_corpus", "tags", "ids", "name", "dim", "metadata", "focus", "chunks",
        "documents", "chunking", "chunk_chars", "stream", "max_words", "generator", "cited"]


@pytest.mark.parametrize("path", [
    "/v1/embed", "/v1/vectors/corpora", f"/v1/vectors/corpora/{REAL}/items",
    f"/v1/vectors/corpora/{REAL}/search", "/v1/vectors/search", "/v1/matrix/search",
    "/v1/matrix/answer", "/v1/matrix/playbooks/record", "/v1/matrix/relevance",
    f"/v1/corpora/{REAL}/documents", f"/v1/corpora/{REAL}/documents/delete"])
def test_arbitrary_json_never_5xx(hard_stack: HardStack, real_corpus: str, path: str) -> None:
    """Known field names with values of any JSON shape, and raw bytes that are barely JSON."""

    @SETTINGS
    @given(body=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=5)
           | st.binary(max_size=64).map(lambda b: {"__raw__": b.hex()}))
    def run(body: dict[str, Any]) -> None:
        url = hard_stack.gateway + path
        before = _state(hard_stack, "post")
        if "__raw__" in body:
            out = hard_stack.call("POST", url, raw=bytes.fromhex(body["__raw__"]))
        else:
            out = hard_stack.call("POST", url, raw=json.dumps(body).encode())
        hard_stack.settle(out)
        _check(hard_stack, "post", url, out.status, out.body, before)

    run()
