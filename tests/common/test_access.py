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
