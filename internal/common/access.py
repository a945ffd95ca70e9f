"""Who may do what: the one authorization function and the one routes table it reads.

Every entry point asks `decide` (the gateway for each request, each daemon's port for each
request, vectord for every corpus it is about to touch, matrixd for the corpus a feedback
names): no route decides by itself. I/O-free, so it is tested without a server.

- A credential resolves to a `Scope` (actions, corpus patterns, optionally a forced
  filter for a tenant token); no scope denies (401).
- An action the scope lacks is a 403 naming the action.
- A corpus outside the scope answers exactly as a corpus that does not exist (the same
  404 with the same message), so a key cannot learn which corpora exist beyond its own.
"""

from __future__ import annotations

import base64
import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from internal.common.errors import Forbidden, NotFound, Unauthorized

Action = Literal["search", "read", "write", "feedback", "admin"]
ACTIONS: tuple[Action, ...] = ("search", "read", "write", "feedback", "admin")
# Not grantable: any valid credential (the MCP endpoint, "who am I"); the stack's own
# calls between daemons (the service token without a caller's scope).
CONNECT = "connect"
INTERNAL = "internal"

# Sent by the gateway (and by matrixd to vectord) with the service token only; a daemon
# ignores it with any other credential, and the gateway drops a client's own.
SCOPE_HEADER = "Lakehouse-Scope"


class Scope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one credential may do: actions, corpus names or glob patterns (`*` all) and,
    for a tenant token, a filter forced into every search (Lakehouse's filter syntax)."""

    key_id: str
    actions: tuple[str, ...]
    corpora: tuple[str, ...]
    filter: dict[str, Any] | None = None
    # A tenant token's `corpora` claim: a corpus must match these too (a subset of the key's).
    within: tuple[str, ...] | None = None
    internal: bool = False

    @property
    def admin(self) -> bool:
        return "admin" in self.actions or self.internal

    @property
    def all_corpora(self) -> bool:
        return (self.admin or "*" in self.corpora) and self.within is None

    def sees(self, corpus: str) -> bool:
        """True when the corpus is inside the scope (a pattern matches it)."""
        if self.all_corpora:
            return True
        return (_matches(self.corpora, corpus) or self.admin) and (
            self.within is None or _matches(self.within, corpus))

    def may(self, action: str) -> bool:
        if self.internal:
            return True
        if action == CONNECT:
            return True
        if action == INTERNAL:
            return False
        return self.admin or action in self.actions


def _matches(patterns: Iterable[str], corpus: str) -> bool:
    return any(p == corpus or fnmatch.fnmatchcase(corpus, p) for p in patterns)


ADMIN = Scope(key_id="admin", actions=("admin",), corpora=("*",))
SERVICE = Scope(key_id="service", actions=("admin",), corpora=("*",), internal=True)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Scope)


def encode(scope: Scope) -> str:
    """The scope as a header value (base64url of its JSON)."""
    return base64.urlsafe_b64encode(_encoder.encode(scope)).decode()


def decode(value: str) -> Scope:
    """A header value back to its scope; Unauthorized when it is not one."""
    try:
        return _decoder.decode(base64.urlsafe_b64decode(value.encode()))
    except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
        raise Unauthorized(f"{SCOPE_HEADER}: not a scope") from None


def not_found(corpus: str) -> NotFound:
    """The answer for a corpus outside the scope: vectord's own for a missing corpus."""
    return NotFound(f"corpus {corpus!r} not found")


def decide(scope: Scope | None, action: str, corpora: Iterable[str] = ()) -> Scope:
    """The scope when it may do `action` on every one of `corpora`, else the denial:
    Unauthorized (no scope), Forbidden (the action), NotFound (a corpus outside it)."""
    if scope is None:
        raise Unauthorized("missing or invalid bearer token")
    if not scope.may(action):
        raise Forbidden(f"this key may not {action}", code="forbidden")
    for corpus in corpora:
        if not scope.sees(corpus):
            raise not_found(corpus)
    return scope


def visible(scope: Scope | None, names: Iterable[str]) -> list[str]:
    """The names inside the scope, in their order (all of them with no scope: auth off)."""
    if scope is None or scope.all_corpora:
        return list(names)
    return [n for n in names if scope.sees(n)]


def forced_filter(scope: Scope | None, given: dict[str, Any] | None) -> dict[str, Any] | None:
    """The caller's filter with the scope's forced in (both must hold)."""
    if scope is None or scope.filter is None:
        return given
    if not given:
        return dict(scope.filter)
    return {"all_of": [given, scope.filter]}


# ---- the routes table ------------------------------------------------------------------

Source = Literal["none", "path", "body", "list"]


@dataclass(frozen=True)
class Rule:
    """One route's access: the actions any of which allows it, and where its corpora are.

    corpora: "path" the {name} in the path (checked before the handler runs), "body"
    named in the body (the daemon checks them when it decodes it: vectord's corpus
    lookups, matrixd's feedback), "list" an answer filtered to the scope, "none".
    """

    method: str
    path: str  # the aiohttp template, as the daemons and the gateway register it
    actions: tuple[str, ...]
    corpora: Source = "none"
    pattern: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        regex = re.sub(r"\{(\w+)(?::[^}]*)?\}", r"(?P<\1>[^/]+)", self.path)
        object.__setattr__(self, "pattern", re.compile(f"^{regex}$"))


_C = "/v1/vectors/corpora/{name}"
_S: tuple[str, ...] = ("search",)
_R: tuple[str, ...] = ("read",)
_W: tuple[str, ...] = ("write",)
_F: tuple[str, ...] = ("feedback",)
_A: tuple[str, ...] = ("admin",)

RULES: tuple[Rule, ...] = (
    Rule("POST", "/v1/embed", _S),
    Rule("GET", "/v1/embed/models", ("search", "read")),
    Rule("POST", "/v1/vectors/corpora", _A),
    # matrixd's searches list and describe corpora as the caller: search keys may too.
    Rule("GET", "/v1/vectors/corpora", ("read", "search"), "list"),
    Rule("GET", _C, ("read", "search"), "path"),
    Rule("DELETE", _C, _A, "path"),
    Rule("POST", f"{_C}/index", _A, "path"),
    Rule("POST", f"{_C}/reembed", _A, "path"),
    Rule("POST", f"{_C}/items", _W, "path"),
    Rule("POST", f"{_C}/items/delete", _W, "path"),
    Rule("GET", f"{_C}/items/{{id}}", _R, "path"),
    Rule("GET", f"{_C}/ids", _R, "path"),
    Rule("POST", f"{_C}/search", _S, "path"),
    Rule("POST", "/v1/vectors/search", _S, "body"),
    Rule("GET", "/v1/vectors/spaces", ("search", "read"), "list"),
    Rule("GET", "/v1/matrix/corpora", ("search", "read"), "list"),
    Rule("POST", "/v1/matrix/search", _S, "body"),
    Rule("POST", "/v1/matrix/playbooks/record", _F, "body"),
    Rule("GET", "/v1/matrix/playbooks", _R, "list"),
    Rule("DELETE", "/v1/matrix/playbooks/{playbook_id}", _F, "body"),
    Rule("POST", "/v1/matrix/relevance", _S),
    Rule("POST", "/v1/matrix/analyze", _S),
    Rule("POST", "/v1/matrix/normalize", _S),
    Rule("POST", "/v1/matrix/smart_search", _S, "body"),
    Rule("POST", "/v1/matrix/search_auto", _S, "body"),
    Rule("POST", "/v1/sync/run", _W, "body"),
    Rule("GET", "/v1/sync/status", _R),
    Rule("*", "/mcp", (CONNECT,)),
    Rule("POST", "/v1/keys", _A),
    Rule("GET", "/v1/keys", _A),
    Rule("GET", "/v1/keys/self", (CONNECT,)),
    Rule("DELETE", "/v1/keys/{key_id}", _A),
    Rule("GET", "/internal/keys/{key_id}", (INTERNAL,)),
)

# Anything no rule names (a passthrough to a route a daemon may add later) needs admin.
FALLBACK = Rule("*", "/{tail:.*}", _A)
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})


def rule_for(method: str, path: str) -> tuple[Rule, dict[str, str]]:
    """The rule of a concrete request and the path's parameters (FALLBACK when none)."""
    for rule in RULES:
        if rule.method not in ("*", method) and not (method == "HEAD" and rule.method == "GET"):
            continue
        m = rule.pattern.match(path)
        if m:
            return rule, m.groupdict()
    return FALLBACK, {}


def check_request(scope: Scope | None, method: str, path: str) -> Scope:
    """`decide` for one request by the routes table: the action, and the corpus in its
    path; corpora in a body are the handler's to check (with the same `decide`)."""
    rule, params = rule_for(method, path)
    if scope is None:
        raise Unauthorized("missing or invalid bearer token")
    action = next((a for a in rule.actions if scope.may(a)), rule.actions[0])
    corpora: Sequence[str] = (params["name"],) if rule.corpora == "path" else ()
    return decide(scope, action, corpora)
