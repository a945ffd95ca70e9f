"""/openapi.json built from the route table and the contract's msgspec Structs."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from internal.api import vectord as vm
from internal.config import Config
from internal.gateway import schemas as s
from internal.gateway.routes import ROUTES, Route
from lakehouse.wire.modes import FUSIONS, MODES
from lakehouse.wire.search import SearchSpec

_REF = "#/components/schemas/{name}"
_PARAM = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")

# The gateway's own routes: (method, path, summary, response type, content type).
OWN_ROUTES: tuple[tuple[str, str, str, type | None, str], ...] = (
    ("GET", "/healthz", "The gateway is up", s.Health, "application/json"),
    ("GET", "/readyz", "Every daemon and PostgreSQL ready, per component", s.Ready, "application/json"),
    ("GET", "/metrics", "Prometheus metrics", None, "text/plain"),
    ("GET", "/openapi.json", "This document", None, "application/json"),
    ("GET", "/v1/keys/self", "The caller's own scope: key id, actions, corpora, filter", None,
     "application/json"),
    ("GET", "/", "The web console", None, "text/html"),
    ("GET", "/console/{name}", "The console's files (app.js, style.css, settings.json)", None,
     "application/octet-stream"),
    ("GET", "/favicon.ico", "The console's icon (an SVG)", None, "image/svg+xml"),
)
_PASSTHROUGH_METHODS = ("get", "post", "put", "patch", "delete")


def openapi_path(template: str) -> str:
    """aiohttp template -> OpenAPI path: '/v1/x/{tail:.*}' -> '/v1/x/{tail}'."""
    return _PARAM.sub(r"{\1}", template)


def _ref(t: type) -> dict[str, Any]:
    # msgspec names a component after its struct; two structs of one name would collide
    # silently, so every struct the document uses must have a unique __name__.
    return {"$ref": _REF.format(name=t.__name__)}


def _json(t: type | None) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(t) if t is not None else {"type": "object"}}}


def _errors(secured: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "4XX": {"description": "Bad request (the daemon's own error)", "content": _json(s.ErrorBody)},
        "429": {"description": "Past this client's share (`rate_limited`); wait `Retry-After` "
                "seconds", "content": _json(s.ErrorBody),
                "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}}},
        "502": {"description": "The daemon failed", "content": _json(s.ErrorBody)},
        "503": {"description": "The daemon is unreachable (`<daemon>_unavailable`)", "content": _json(s.ErrorBody)},
        "504": {"description": "The daemon did not answer in time", "content": _json(s.ErrorBody)},
    }
    if secured:
        out["401"] = {"description": "Missing or invalid bearer token", "content": _json(s.ErrorBody)}
    return out


# Path and query parameters, with the limits the daemons enforce.
_PATH_PARAMS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": vm.NAME_PATTERN},
    "task_id": {"type": "integer", "minimum": 1},
    "id": {"type": "string", "minLength": 1, "maxLength": vm.MAX_ID_BYTES,
           "description": f"at most {vm.MAX_ID_BYTES} bytes of UTF-8, no NUL, not '.' or "
                          "'..'; percent-encoded as one path segment (RFC 3986: `/` as %2F, "
                          "`#` %23, `?` %3F, `%` %25, `{` %7B)"},
}
_PAGE = [
    {"name": "prefix", "in": "query", "required": False,
     "schema": {"type": "string", "maxLength": vm.MAX_ID_BYTES}},
    {"name": "after", "in": "query", "required": False,
     "schema": {"type": "string", "maxLength": vm.MAX_ID_BYTES}},
    {"name": "limit", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": vm.MAX_IDS_PAGE, "default": 1000}},
]
_WAIT = [{"name": "wait", "in": "query", "required": False,
          "schema": {"type": "boolean", "default": False},
          "description": "answer once the task ended (at most 50 s; then 202 as it is)"}]
_QUERY_PARAMS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("GET", "/v1/vectors/corpora/{name}/ids"): _PAGE,
    ("GET", "/v1/corpora/{name}/documents"): _PAGE,
    ("POST", "/v1/corpora/{name}/documents"): _WAIT,
    ("POST", "/v1/corpora/{name}/documents/delete"): _WAIT,
    ("DELETE", "/v1/corpora/{name}/documents/{id}"): _WAIT,
    ("GET", "/v1/tasks/{task_id}"): _WAIT,
    ("GET", "/v1/vectors/corpora/{name}/items/{id}"): [
        {"name": "include", "in": "query", "required": False,
         "schema": {"type": "string", "enum": ["vector"]}}],
    ("GET", "/v1/tasks"): [
        {"name": "corpus", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "corpus names, comma-separated"},
        {"name": "state", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "enqueued, processing, succeeded, failed (comma-separated)"},
        {"name": "kind", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "documents_add, documents_delete (comma-separated)"},
        {"name": "from", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 1}, "description": "tasks with ids up to it"},
        {"name": "limit", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20}},
    ],
}


def _operation(route: Route, method: str, secured: bool) -> dict[str, Any]:
    params = [{"name": name, "in": "path", "required": True,
               "schema": _PATH_PARAMS.get(name, {"type": "string"})}
              for name in _PARAM.findall(route.path)]
    params += _QUERY_PARAMS.get((method.upper(), route.path), [])
    content = _json(route.response)
    if route.events:  # `"stream": true`: the events, one JSON object a `data:` line
        content["text/event-stream"] = {"schema": {
            "oneOf": [_ref(t) for t in route.events],
            "description": "server-sent events: `event: <type>` and `data: <JSON>`, "
                           "then `data: [DONE]`"}}
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": f"{method}_{route.upstream}_{openapi_path(route.path)}",
        "tags": [route.upstream],
        "responses": {str(route.status): {"description": "OK", "content": content},
                      **_errors(secured)},
    }
    if params:
        op["parameters"] = params
    if route.request is not None:
        op["requestBody"] = {"required": True, "content": _json(route.request)}
    elif route.method == "*" and method in ("post", "put", "patch"):
        op["requestBody"] = {"required": False, "content": _json(None)}
    if secured:
        op["security"] = [{"bearer": []}]
    return op


def _limit(schema: dict[str, Any], key: str, value: int) -> None:
    """Set a bound on a property schema, also inside `anyOf` (an optional field)."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") in ("array", "integer"):
            branch[key] = value


def _configured_limits(components: dict[str, Any], cfg: Config) -> None:
    """Limits that are settings, not constants: what this stack's daemons enforce."""
    props = {name: c.get("properties", {}) for name, c in components.items()}
    _limit(props["UpsertRequest"]["items"], "maxItems", cfg.vectord.max_batch)
    _limit(props["DeleteItems"]["ids"], "maxItems", vm.MAX_IDS_PAGE)
    _limit(props["EmbedRequest"]["texts"], "maxItems", cfg.embedd.max_texts)
    for request in ("MatrixSearchRequest", "AnswerRequest"):
        _limit(props[request]["corpora"], "maxItems", cfg.matrixd.max_corpora)
        for key in ("k", "per_corpus_k", "playbook_top_k"):
            _limit(props[request][key], "maximum", cfg.matrixd.max_k)


def _registered(components: dict[str, Any], requests: list[type]) -> None:
    """The modes and fusion methods a search request may name: the registries' (a name is
    a checked string on the wire, so the document lists the stack's own)."""
    choices = {"mode": list(MODES), "fusion": list(FUSIONS)}
    for t in requests:
        if not issubclass(t, SearchSpec):
            continue
        props = components[t.__name__].get("properties", {})
        for key, names in choices.items():
            for branch in props.get(key, {}).get("anyOf", [props.get(key, {})]):
                if branch.get("type") == "string":
                    branch["enum"] = names


def build(secured: bool, cfg: Config | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route the gateway serves.

    cfg: the stack's settings, for the limits that are configurable (batch sizes, k).
    """
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, resp, ctype in OWN_ROUTES:
        content = ({ctype: {"schema": _ref(resp)}} if resp is not None
                   else {ctype: {"schema": {"type": "object" if ctype == "application/json" else "string"}}})
        op: dict[str, Any] = {"summary": summary, "operationId": f"gateway{path.replace('/', '_')}",
                              "tags": ["gateway"], "responses": {"200": {"description": "OK", "content": content}}}
        if path == "/readyz":
            op["responses"]["503"] = {"description": "Not ready", "content": _json(s.Ready)}
        if secured and path == "/metrics":
            op["security"] = [{"bearer": []}]
        paths.setdefault(path, {})[method.lower()] = op
    for route in ROUTES:
        methods = _PASSTHROUGH_METHODS if route.method == "*" else (route.method.lower(),)
        for method in methods:
            paths.setdefault(openapi_path(route.path), {})[method] = _operation(route, method, secured)
    types: list[type] = [s.ErrorBody, s.Health, s.Ready]
    for route in ROUTES:
        types += [t for t in (route.request, route.response, *route.events) if t is not None]
    unique = list(dict.fromkeys(types))
    _, components = msgspec.json.schema_components(unique, ref_template=_REF)
    missing = {t.__name__ for t in unique} - set(components)
    if missing:  # a name clash: msgspec qualified the names, so our refs would dangle
        raise RuntimeError(f"openapi: struct names must be unique: {sorted(missing)}")
    _configured_limits(components, cfg or Config())
    _registered(components, [r.request for r in ROUTES if r.request is not None])
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Lakehouse", "version": "0.1.0",
                 "description": "Multi-corpus retrieval behind one gateway. Error body: ErrorBody."},
        "paths": paths,
        "components": {"schemas": components},
    }
    if secured:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return doc
