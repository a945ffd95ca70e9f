"""The one authorization function and its routes table (internal.common.access)."""

from __future__ import annotations

import pytest

from internal.common import access
from internal.common.access import Scope, check_request, decide, forced_filter, rule_for, visible
from internal.common.errors import Forbidden, NotFound, Unauthorized


def key(actions: tuple[str, ...], corpora: tuple[str, ...] = ("team-a-*", "docs"),
        **kw: object) -> Scope:
    return Scope(key_id="k1", actions=actions, corpora=corpora, **kw)  # type: ignore[arg-type]


def test_no_scope_denies() -> None:
    with pytest.raises(Unauthorized):
        decide(None, "search", ["docs"])


def test_action_outside_the_key_is_a_403() -> None:
    with pytest.raises(Forbidden):
        decide(key(("search",)), "write", ["docs"])


def test_corpus_outside_answers_as_a_missing_one() -> None:
    with pytest.raises(NotFound) as exc:
        decide(key(("search",)), "search", ["other"])
    assert str(exc.value) == str(access.not_found("other")) == "corpus 'other' not found"


def test_patterns_and_admin() -> None:
    k = key(("read",))
    assert k.sees("team-a-x") and k.sees("docs") and not k.sees("team-b")
    assert visible(k, ["docs", "team-b", "team-a-1"]) == ["docs", "team-a-1"]
    assert access.ADMIN.sees("anything") and access.ADMIN.may("write")
    assert not access.ADMIN.may(access.INTERNAL) and access.SERVICE.may(access.INTERNAL)


def test_tenant_within_narrows_the_key() -> None:
    t = key(("search",), ("*",), within=("docs",), filter={"metadata": {"tenant": "a"}})
    assert t.sees("docs") and not t.sees("team-a-1") and not t.all_corpora
    assert forced_filter(t, None) == {"metadata": {"tenant": "a"}}
    assert forced_filter(t, {"tags_any": ["x"]}) == {
        "all_of": [{"tags_any": ["x"]}, {"metadata": {"tenant": "a"}}]}


def test_scope_header_round_trip_and_garbage() -> None:
    t = key(("search",), within=("docs",), filter={"metadata": {"tenant": "a"}})
    assert access.decode(access.encode(t)) == t
    with pytest.raises(Unauthorized):
        access.decode("not base64 json!")


def test_a_corpus_outside_the_key_is_missing_before_any_action_is_asked() -> None:
    """The scope is decided before the action: a key that may not write, deleting items in
    a corpus outside it, hears the corpus does not exist (as for any missing corpus)."""
    k = key(("read",))
    for method, path in (("POST", "/v1/vectors/corpora/team-b/items/delete"),
                         ("POST", "/v1/vectors/corpora/team-b/items"),
                         ("DELETE", "/v1/vectors/corpora/team-b"),
                         ("POST", "/v1/vectors/corpora/team-b/reembed"),
                         ("POST", "/v1/vectors/corpora/team-b/index/settings"),
                         ("GET", "/v1/vectors/corpora/team-b/items/x")):
        with pytest.raises(NotFound) as exc:
            check_request(k, method, path)
        assert str(exc.value) == "corpus 'team-b' not found", (method, path)
    with pytest.raises(Forbidden):  # inside the key: the action decides
        check_request(k, "POST", "/v1/vectors/corpora/docs/items/delete")


@pytest.mark.parametrize(("actions", "method", "path", "message"), [
    (("search",), "POST", "/v1/vectors/corpora/docs/items",
     "writing items needs the write action; this key has: search"),
    (("search",), "GET", "/v1/vectors/corpora/docs/ids",
     "listing a corpus's ids needs the read or write action; this key has: search"),
    (("search", "write"), "POST", "/v1/vectors/corpora",
     "creating a corpus needs the admin action; this key has: search, write"),
    (("read",), "POST", "/v1/vectors/corpora/docs/items/delete",
     "deleting items needs the write action; this key has: read"),
    (("read", "search", "write"), "POST", "/v1/vectors/corpora/docs/index/settings",
     "changing a corpus's index settings needs the admin action; this key has: read, search, write"),
    (("read",), "GET", "/v1/somewhere/new",
     "GET /v1/somewhere/new needs the admin action; this key has: read"),
])
def test_a_403_names_what_the_route_needs_and_what_the_key_has(
        actions: tuple[str, ...], method: str, path: str, message: str) -> None:
    with pytest.raises(Forbidden) as exc:
        check_request(key(actions), method, path)
    assert exc.value.message == message and exc.value.code == "forbidden"


def test_a_write_key_ingests_on_its_own() -> None:
    """What `lakehouse ingest` and `lakehouse sync` call, a write key may: the corpus's
    settings, its ids and hashes, the embedder, the writes and deletes."""
    k = key(("write",))
    for method, path in (("GET", "/v1/vectors/corpora/docs"), ("GET", "/v1/vectors/corpora/docs/ids"),
                         ("GET", "/v1/embed/models"), ("POST", "/v1/embed"),
                         ("POST", "/v1/vectors/corpora/docs/items"),
                         ("POST", "/v1/vectors/corpora/docs/items/delete")):
        check_request(k, method, path)
    with pytest.raises(Forbidden):
        check_request(k, "GET", "/v1/vectors/corpora/docs/items/x")  # reading an item: read


def test_an_id_with_an_encoded_slash_is_one_segment() -> None:
    """Requests are matched on the path as routed (`%2F` kept): `a/b` is an item's id."""
    rule, params = rule_for("GET", "/v1/vectors/corpora/docs/items/a%2Fb")
    assert rule.doing == "reading an item" and params == {"name": "docs", "id": "a%2Fb"}
    check_request(key(("read",)), "GET", "/v1/vectors/corpora/docs/items/%7B.md%230")


@pytest.mark.parametrize(("method", "path", "action", "allowed"), [
    ("POST", "/v1/vectors/corpora/docs/search", "search", True),
    ("POST", "/v1/vectors/corpora/team-b/search", "search", False),
    ("DELETE", "/v1/vectors/corpora/docs", "admin", False),
    ("POST", "/v1/vectors/corpora/docs/items", "write", False),
    ("GET", "/v1/vectors/corpora/docs/ids", "read", False),
    ("GET", "/v1/vectors/corpora", "read", True),
    ("POST", "/v1/matrix/search", "search", True),
    ("GET", "/v1/somewhere/new", "admin", False),
    ("POST", "/mcp", access.CONNECT, True),
    ("GET", "/v1/vectors/corpora/docs/items/{.md#0", "read", False),
    ("POST", "/v1/embed", "write", True),
    ("POST", "/v1/vectors/corpora", "admin", False),
])
def test_routes_table(method: str, path: str, action: str, allowed: bool) -> None:
    rule, _ = rule_for(method, path)
    assert action in rule.actions
    k = key(("search",))
    if allowed:
        check_request(k, method, path)
    else:
        with pytest.raises((Forbidden, NotFound)):
            check_request(k, method, path)


def test_every_gateway_route_has_a_rule() -> None:
    from internal.gateway.routes import ROUTES
    for route in ROUTES:
        if "{tail" in route.path:
            continue
        concrete = route.path.replace("{name}", "docs").replace("{id}", "i").replace(
            "{playbook_id}", "p")
        rule, _ = rule_for("GET" if route.method == "*" else route.method, concrete)
        assert rule is not access.FALLBACK, route.path
