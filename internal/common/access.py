"""Who may do what: the one authorization function and the one routes table it reads.

Every entry point asks `decide` (the gateway for each request, each daemon's port for each
request, vectord for every corpus it is about to touch, matrixd for the corpus a feedback
names): no route decides by itself. I/O-free, so it is tested without a server.

- A credential resolves to a `Scope` (actions, corpus patterns, optionally a forced
  filter for a tenant token); no scope denies (401).
- A corpus outside the scope answers exactly as a corpus that does not exist (the same
  404 with the same message), whatever the route and the key's actions: decided before
  the action, so a key cannot learn which corpora exist beyond its own.
- An action the scope lacks is a 403 naming what the route does, the action it needs and
  the actions the key has.
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
from internal.common.suggest import did_you_mean

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


_GLOB = re.compile(r"[*?\[]")


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


def not_found(corpus: str, scope: Scope | None = None,
              names: Iterable[str] | None = None) -> NotFound:
    """404 `corpus_not_found` for a corpus that does not exist, and for one outside the
    scope (the same answer: a key never learns which corpora exist beyond its own), with
    the nearest of `names` when one is close (the corpora the caller sees; by default the
    scope's own names, which its holder knows)."""
    if names is None:
        names = [] if scope is None else [c for c in scope.corpora if not _GLOB.search(c)]
    return NotFound(f"corpus {corpus!r} not found{did_you_mean(corpus, names)}",
                    code="corpus_not_found")


def decide(scope: Scope | None, action: str | Sequence[str], corpora: Iterable[str] = (),
           doing: str = "") -> Scope:
    """The scope when it sees every one of `corpora` and holds `action` (or one of
    several), else the denial: Unauthorized (no scope), NotFound (a corpus outside it,
    decided first: a corpus outside the key answers as a missing one whatever the route),
    Forbidden naming the action `doing` needs and the actions the key has."""
    if scope is None:
        raise Unauthorized("missing bearer token")
    for corpus in corpora:
        if not scope.sees(corpus):
            raise not_found(corpus, scope)
    needs = (action,) if isinstance(action, str) else tuple(action)
    if not any(scope.may(a) for a in needs):
        raise Forbidden(forbidden_message(scope, needs, doing), code="forbidden")
    return scope


def forbidden_message(scope: Scope, needs: Sequence[str], doing: str = "") -> str:
    """'creating a corpus needs the admin action; this key has: search, write'."""
    if INTERNAL in needs:
        return f"{doing or 'this route'} is the stack's own"
    wanted = " or ".join(needs)
    has = ", ".join(scope.actions) or "no action"
    return f"{doing or 'this route'} needs the {wanted} action; this key has: {has}"


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
    """One route's access: the actions any of which allows it, where its corpora are, and
    what the route does (said in a 403: "creating a corpus needs the admin action").

    corpora: "path" the {name} in the path (checked before the handler runs), "body"
    named in the body (the daemon checks them when it decodes it: vectord's corpus
    lookups, matrixd's feedback), "list" an answer filtered to the scope, "none".
    """

    method: str
    path: str  # the aiohttp template, as the daemons and the gateway register it
    actions: tuple[str, ...]
    corpora: Source = "none"
    doing: str = ""
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
# A write key ingests and syncs on its own: it reads a corpus's settings and its ids with
# their content hashes (to skip what is stored) and embeds the texts it writes.
_RSW: tuple[str, ...] = ("read", "search", "write")

_D = "/v1/corpora/{name}/documents"

RULES: tuple[Rule, ...] = (
    # Adding documents to a corpus that does not exist creates it: admin (the handler asks).
    Rule("POST", _D, _W, "path", "adding documents"),
    Rule("GET", _D, ("read", "write"), "path", "listing documents"),
    Rule("POST", f"{_D}/delete", _W, "path", "deleting documents"),
    Rule("GET", f"{_D}/{{id}}", _R, "path", "reading a document"),
    Rule("DELETE", f"{_D}/{{id}}", _W, "path", "deleting a document"),
    # A task is its corpus's: one outside the key answers as one that does not exist.
    Rule("GET", "/v1/tasks", ("read", "write"), "list", "listing tasks"),
    Rule("GET", "/v1/tasks/{task_id}", ("read", "write"), "body", "reading a task"),
    Rule("POST", "/v1/embed", ("search", "write"), doing="embedding texts"),
    Rule("GET", "/v1/embed/models", _RSW, doing="listing the embedding models"),
    # Creating a corpus picks its model and dimension for everyone: admin, as deleting.
    Rule("POST", "/v1/vectors/corpora", _A, doing="creating a corpus"),
    # matrixd's searches list and describe corpora as the caller: search keys may too.
    Rule("GET", "/v1/vectors/corpora", ("read", "search"), "list", "listing corpora"),
    Rule("GET", _C, _RSW, "path", "reading a corpus"),
    # A corpus's description says what its items are about: whoever writes them says so.
    Rule("PATCH", _C, ("write",), "path", "describing a corpus"),
    Rule("DELETE", _C, _A, "path", "deleting a corpus"),
    Rule("GET", f"{_C}/profile", _RSW, "path", "reading a corpus's profile"),
    Rule("POST", f"{_C}/index", _A, "path", "building a corpus's index"),
    Rule("POST", f"{_C}/index/settings", _A, "path", "changing a corpus's index settings"),
    Rule("POST", f"{_C}/reembed", _A, "path", "re-embedding a corpus"),
    Rule("POST", f"{_C}/convert", _A, "path", "converting a corpus's precision"),
    Rule("POST", f"{_C}/items", _W, "path", "writing items"),
    Rule("POST", f"{_C}/items/delete", _W, "path", "deleting items"),
    Rule("GET", f"{_C}/items/{{id}}", _R, "path", "reading an item"),
    Rule("DELETE", f"{_C}/items/{{id}}", _W, "path", "deleting an item"),
    Rule("GET", f"{_C}/ids", ("read", "write"), "path", "listing a corpus's ids"),
    Rule("POST", f"{_C}/search", _S, "path", "searching"),
    Rule("POST", "/v1/vectors/search", _S, "body", "searching"),
    Rule("GET", "/v1/vectors/spaces", ("search", "read"), "list", "listing embedding spaces"),
    Rule("GET", "/v1/vectors/storage", ("search", "read"), "list", "reading the corpora's sizes"),
    Rule("GET", "/v1/matrix/corpora", ("search", "read"), "list", "listing corpora"),
    Rule("POST", "/v1/matrix/search", _S, "body", "searching"),
    Rule("POST", "/v1/matrix/answer", _S, "body", "answering"),
    Rule("POST", "/v1/matrix/answer/feedback", _F, "body", "recording feedback"),
    Rule("POST", "/v1/matrix/playbooks/record", _F, "body", "recording feedback"),
    Rule("GET", "/v1/matrix/playbooks", _R, "list", "listing feedback"),
    Rule("DELETE", "/v1/matrix/playbooks/{playbook_id}", _F, "body", "deleting feedback"),
    Rule("POST", "/v1/matrix/ranker/train", _F, "body", "training the ranker"),
    Rule("GET", "/v1/matrix/ranker", ("read", "search"), "list", "listing the ranker's models"),
    Rule("POST", "/v1/matrix/relevance", _S, doing="scoring relevance"),
    Rule("POST", "/v1/matrix/analyze", _S, doing="analysing a query"),
    Rule("POST", "/v1/matrix/normalize", _S, doing="normalising observations"),
    Rule("POST", "/v1/matrix/smart_search", _S, "body", "searching"),
    Rule("POST", "/v1/matrix/search_auto", _S, "body", "searching"),
    Rule("POST", "/v1/sync/run", _W, "body", "running the wiki sync"),
    Rule("GET", "/v1/sync/status", _R, doing="reading the wiki sync's status"),
    Rule("*", "/mcp", (CONNECT,)),
    Rule("POST", "/v1/keys", _A, doing="creating a key"),
    Rule("GET", "/v1/keys", _A, doing="listing keys"),
    Rule("GET", "/v1/keys/self", (CONNECT,)),
    Rule("DELETE", "/v1/keys/{key_id}", _A, doing="revoking a key"),
    Rule("GET", "/internal/keys/{key_id}", (INTERNAL,), doing="looking a key up"),
    Rule("POST", "/internal/rankers", (INTERNAL,), doing="storing a ranker model"),
    Rule("GET", "/internal/rankers", (INTERNAL,), doing="listing ranker models"),
    Rule("GET", "/internal/rankers/current", (INTERNAL,), doing="reading the ranker models"),
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
    """`decide` for one request by the routes table: the corpus in its path, then the
    action; corpora in a body are the handler's to check (with the same `decide`).
    `path` as the router matches it (`rel_url.path_safe`: an id's encoded `/` kept)."""
    rule, params = rule_for(method, path)
    corpora: Sequence[str] = (params["name"],) if rule.corpora == "path" else ()
    return decide(scope, rule.actions, corpora, rule.doing or f"{method} {path}")
