"""Scoped API keys and tenant tokens on the shared stack (tests/agents/conftest.py).

The matrix: every route of /openapi.json x every kind of credential x corpus A, corpus B
and "all corpora", expected allow/deny read from the routes table (internal.common.access);
0 unexpected allows, 0 5xx, and no answer to a key of A ever names B. Tenant tokens:
random tokens and queries in every mode (hypothesis); no hit outside the token's filter
or corpora. MCP with a scoped key sees only its corpora.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec

import lakehouse
from internal.api import keys as api_keys
from internal.common import access
from tests import ranker_data
from tests.agents.conftest import GUIDES, NOTES, Live, call
from tests.agents.test_console import browser, search, wait  # noqa: F401 (browser: a fixture)
from tests.helpers import ROOT

A, B = "keys_a", "keys_b"
TENANTS = "keys_t"
SECRET_WORD = "zanzibarquux"  # only in tenant b's rows


def raw_call(url: str, method: str, body: Any, headers: dict[str, str]) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@dataclass
class Keys:
    secrets: dict[str, str]  # credential name -> Authorization header value ("" none)
    scopes: dict[str, access.Scope | None]


def _key(live: Live, name: str, actions: list[str], corpora: list[str],
         expires_at: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "actions": actions, "corpora": corpora}
    if expires_at:
        body["expires_at"] = expires_at
    status, out = call(f"{live.url}/v1/keys", body, live.auth)
    assert status == 201, out
    return dict(out)


@pytest.fixture(scope="module")
def keys(live: Live) -> Iterator[Keys]:
    status, emb = call(f"{live.url}/v1/embed", {"texts": ["tea"]}, live.auth)
    assert status == 200, emb
    dim, model = emb["dim"], emb["model"]
    for name in (A, B):
        status, out = call(f"{live.url}/v1/vectors/corpora", {"name": name, "dim": dim,
                                                              "model": model}, live.auth)
        assert status in (201, 409), out
        call(f"{live.url}/v1/vectors/corpora/{name}/items", {"model": model, "items": [
            {"id": f"{name}_1", "vector": emb["vectors"][0], "title": f"{name} tea",
             "text": f"tea notes of {name}"}]}, live.auth)
    secrets: dict[str, str] = {"none": "", "wrong": "Bearer lhk_k0000000000000000_" + "x" * 43,
                               "admin": f"Bearer {live.token}"}
    scopes: dict[str, access.Scope | None] = {"none": None, "wrong": None, "admin": access.ADMIN}
    for action in ("search", "read", "write", "feedback"):
        out = _key(live, f"{action} A", [action], [A])
        secrets[action] = f"Bearer {out['key']}"
        scopes[action] = access.Scope(key_id=out["id"], actions=(action,), corpora=(A,))
    expired = _key(live, "expired", ["search", "read"], [A], "2020-01-01T00:00:00Z")
    secrets["expired"], scopes["expired"] = f"Bearer {expired['key']}", None
    revoked = _key(live, "revoked", ["search", "read"], [A])
    status, out = call(f"{live.url}/v1/keys/{revoked['id']}", None, live.auth, method="DELETE")
    assert status == 200, out
    secrets["revoked"], scopes["revoked"] = f"Bearer {revoked['key']}", None
    yield Keys(secrets, scopes)


def _requests(path: str, method: str, corpus: str | None) -> tuple[str, Any]:
    """A concrete path and a body for one route; corpus None: "all corpora"."""
    c = corpus or A
    # A delete by id names an item that is not there: the matrix keeps its corpora whole.
    item = f"{c}_gone" if method == "delete" else f"{c}_1"
    concrete = (path.replace("{name}", c).replace("{id}", item)
                .replace("{playbook_id}", "0" * 64).replace("{key_id}", "k" + "0" * 16))
    body: Any = None
    if method in ("post", "put", "patch"):
        body = {}
        if path.endswith("/search") or path.endswith("search_auto") or path.endswith("smart_search"):
            body = {"query_text": "tea", "mode": "lexical"} if "smart" not in path and \
                "auto" not in path else {"query_text": "tea"}
            if corpus is not None and "/corpora/" not in path:
                body["corpora"] = [corpus]
        if path.endswith("/answer"):
            body = {"query_text": "tea", "generator": "extractive"}
            if corpus is not None:
                body["corpora"] = [corpus]
        if path.endswith("answer/feedback"):
            body = {"query_text": "tea?", "cited": [{"corpus": c, "id": "no-such-item"}],
                    "score": 1}
        if path.endswith("ranker/train") and corpus is not None:
            body = {"corpora": [corpus]}
        if path.endswith("playbooks/record"):
            body = {"query_text": "tea?", "answer_id": "no-such-item", "answer_corpus": c,
                    "score": 1}
    return concrete, body


SKIP = {"/mcp", "/", "/console/{name}", "/v1/vectors/{tail}", "/v1/matrix/{tail}",
        "/v1/embed/{tail}", "/v1/sync/{tail}"}
DESTRUCTIVE = {("delete", "/v1/vectors/corpora/{name}")}


def _expected(scope: access.Scope | None, method: str, path: str, corpus: str | None) -> bool:
    rule, _ = access.rule_for(method.upper(), _requests(path, method, corpus)[0])
    if scope is None:
        return False
    if not any(scope.may(a) for a in rule.actions):
        return False
    if path.startswith("/v1/sync/"):
        return scope.sees("wiki")  # the stack's synced corpus
    if corpus is not None and rule.corpora in ("path", "body") and "playbooks/{" not in path:
        return scope.sees(corpus)
    return True


def _missing(status: int, text: str, corpus: str) -> bool:
    """The answer for a corpus that does not exist: 404, or matrixd's 502 naming it (the
    answer a missing corpus gets there today)."""
    return status in (404, 502) and f"corpus {corpus!r} not found" in text


def _denied(status: int, text: str, corpus: str | None) -> bool:
    if status in (401, 403):
        return True
    if status == 200 and corpus is not None and text.startswith("{"):
        results = json.loads(text).get("results")  # a multi-search: errors per corpus
        if isinstance(results, list) and results and all(
                r.get("status") == 404 for r in results if r.get("corpus") == corpus):
            return any(r.get("corpus") == corpus for r in results)
    return corpus is not None and _missing(status, text, corpus)


def test_matrix_every_route_every_credential(live: Live, keys: Keys) -> None:
    status, doc = call(f"{live.url}/openapi.json")
    assert status == 200
    routes = [(m, p) for p, ops in doc["paths"].items() for m in ops
              if p not in SKIP and m in ("get", "post", "delete") and p.startswith("/v1/")]
    unexpected_allow, unexpected_deny, errors5xx, leaks, cells = [], [], [], [], 0
    not_missing = []  # a corpus outside the key not answered as a missing one
    for method, path in routes:
        for cred, header in keys.secrets.items():
            scope = keys.scopes[cred]
            corpora: tuple[str | None, ...] = (A, B, None) if "{name}" in path or method == "post" \
                else (None,)
            for corpus in corpora:
                if (method, path) in DESTRUCTIVE and cred == "admin":
                    continue  # would drop the matrix's own corpus; the admin's right is tested below
                url_path, body = _requests(path, method, corpus)
                status, text = raw_call(f"{live.url}{url_path}", method.upper(), body,
                                        {"Authorization": header} if header else {})
                cells += 1
                where = f"{method.upper()} {url_path} as {cred}: {status} {text[:200]}"
                if status >= 500 and not (corpus is not None and _missing(status, text, corpus)):
                    errors5xx.append(where)
                allowed = not _denied(status, text, corpus)
                expected = _expected(scope, method, path, corpus)
                if allowed and not expected:
                    unexpected_allow.append(where)
                if expected and not allowed:
                    unexpected_deny.append(where)
                if scope is not None and not scope.admin and corpus != B and B in text:
                    leaks.append(where)
                rule, _ = access.rule_for(method.upper(), url_path)
                if (scope is not None and corpus == B and not scope.sees(B)
                        and rule.corpora == "path" and not _missing(status, text, B)):
                    not_missing.append(where)  # the scope is decided before the action
    print(f"\nkeys matrix: {len(routes)} routes, {cells} cells, {len(unexpected_allow)} "
          f"unexpected allows, {len(unexpected_deny)} unexpected denies, {len(errors5xx)} 5xx, "
          f"{len(leaks)} leaks, {len(not_missing)} outside corpora not answered as missing")
    for name, found in (("allow", unexpected_allow), ("deny", unexpected_deny),
                        ("5xx", errors5xx), ("leak", leaks), ("not missing", not_missing)):
        for where in found:
            print(f"unexpected {name}: {where}")
    assert not unexpected_allow, unexpected_allow
    assert not errors5xx, errors5xx
    assert not leaks, leaks
    assert not unexpected_deny, unexpected_deny
    assert not not_missing, not_missing


def test_scoped_lists_and_searches_see_only_their_corpora(live: Live, keys: Keys) -> None:
    auth = {"Authorization": keys.secrets["read"]}
    status, out = call(f"{live.url}/v1/vectors/corpora", None, auth)
    assert status == 200 and [c["name"] for c in out["corpora"]] == [A]
    status, out = call(f"{live.url}/v1/matrix/corpora", None, auth)
    assert status == 200 and [c["name"] for c in out["corpora"]] == [A]
    auth = {"Authorization": keys.secrets["search"]}
    status, out = call(f"{live.url}/v1/matrix/search", {"query_text": "tea", "k": 20}, auth)
    assert status == 200, out
    assert out["hits"] and {h["corpus"] for h in out["hits"]} == {A}
    status, out = call(f"{live.url}/v1/vectors/search",
                       {"query_text": "tea", "mode": "lexical", "corpora": [A, B]}, auth)
    assert status == 200, out
    assert [r.get("status") for r in out["results"] if r["corpus"] == B] == [404]
    # The same answer as a corpus that does not exist (as close to the key's own name).
    _, missing = call(f"{live.url}/v1/vectors/corpora/keys_c/search",
                      {"query_text": "tea", "mode": "lexical"}, auth)
    _, hidden = call(f"{live.url}/v1/vectors/corpora/{B}/search",
                     {"query_text": "tea", "mode": "lexical"}, auth)
    assert hidden["error"] == {**missing["error"],
                               "message": missing["error"]["message"].replace("keys_c", B)}


def test_admin_may_delete_and_keys_list_never_shows_a_secret(live: Live, keys: Keys) -> None:
    status, out = call(f"{live.url}/v1/keys", None, live.auth)
    assert status == 200 and out["keys"]
    text = json.dumps(out)
    for header in keys.secrets.values():
        secret = header.removeprefix("Bearer ")
        assert not secret.startswith("lhk_") or secret not in text
    assert all("key" not in k for k in out["keys"])
    status, _ = call(f"{live.url}/v1/vectors/corpora", {"name": "keys_gone", "dim": 4}, live.auth)
    assert status == 201
    status, out = call(f"{live.url}/v1/vectors/corpora/keys_gone", None, live.auth, method="DELETE")
    assert status == 200, out


# ---- tenant tokens -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tenant_key(live: Live) -> str:
    rows = []
    for tenant in ("a", "b", "c"):
        for i, text in enumerate(["green tea brewing at 80 degrees", "espresso pressure nine bars",
                                  "cold brew coffee twelve hours"]):
            extra = f" {SECRET_WORD}" if tenant == "b" else ""
            rows.append({"id": f"{tenant}{i}", "title": f"{tenant} {text[:12]}",
                         "text": text + extra, "metadata": {"tenant": tenant}})
    status, emb = call(f"{live.url}/v1/embed", {"texts": [r["text"] for r in rows]}, live.auth)
    assert status == 200, emb
    status, out = call(f"{live.url}/v1/vectors/corpora", {"name": TENANTS, "dim": emb["dim"],
                                                          "model": emb["model"]}, live.auth)
    assert status in (201, 409), out
    items = [{**r, "vector": v} for r, v in zip(rows, emb["vectors"], strict=True)]
    status, out = call(f"{live.url}/v1/vectors/corpora/{TENANTS}/items",
                       {"items": items, "model": emb["model"]}, live.auth)
    assert status == 200, out
    # Answers recorded from tenant b: a tenant a token's playbook never brings them in.
    for q in ("green tea", "espresso", "cold brew"):
        status, out = call(f"{live.url}/v1/matrix/playbooks/record",
                           {"query_text": q, "answer_id": "b0", "answer_corpus": TENANTS,
                            "score": 1}, live.auth)
        assert status == 200, out
    return str(_key(live, "tenant search", ["search"], [TENANTS, GUIDES])["key"])


def _search(live: Live, token: str, kind: str, query: str) -> tuple[int, Any]:
    auth = {"Authorization": f"Bearer {token}"}
    if kind == "smart":
        return call(f"{live.url}/v1/matrix/smart_search", {"query_text": query, "k": 20}, auth)
    if kind == "auto":
        return call(f"{live.url}/v1/matrix/search_auto", {"query_text": query, "k": 20}, auth)
    # Facet counts too: a count over rows the token may not see would reveal them.
    body: dict[str, Any] = {"query_text": query, "k": 20, "mode": kind,
                            "facets": ["metadata.tenant", "corpus"]}
    if kind == "prf":
        body.update(mode="hybrid", prf={"docs": 5, "terms": 10})
    if kind == "playbook":
        body.update(mode="hybrid", use_playbook=True)
    return call(f"{live.url}/v1/matrix/search", body, auth)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tenant=st.sampled_from(["a", "b", "c"]),
       corpora=st.sampled_from([None, [TENANTS], [TENANTS, GUIDES]]),
       kind=st.sampled_from(["vector", "lexical", "hybrid", "keyword", "prf", "playbook",
                             "smart", "auto"]),
       query=st.sampled_from(["green tea", "espresso", "coffee", "brew", SECRET_WORD]))
def test_tenant_token_hits_never_leave_its_filter(live: Live, tenant_key: str, tenant: str,
                                                  corpora: list[str] | None, kind: str,
                                                  query: str) -> None:
    token = lakehouse.tenant_token(tenant_key, corpora=corpora,
                                   filter={"metadata": {"tenant": tenant}}, expires_in=600)
    status, out = _search(live, token, kind, query)
    assert status == 200, out
    for hit in out.get("hits") or []:
        assert hit["corpus"] in (corpora or [TENANTS, GUIDES]), hit
        assert (hit.get("metadata") or {}).get("tenant") == tenant, hit
    if tenant != "b":  # (smart search repeats the question itself in its plan)
        assert SECRET_WORD not in json.dumps(out.get("hits") or [])
    facets = out.get("facets") or {}
    assert set(facets.get("metadata.tenant") or {}) <= {tenant}, facets
    assert set(facets.get("corpus") or {}) <= set(corpora or [TENANTS, GUIDES]), facets
    if kind in ("lexical", "hybrid", "prf", "playbook") and query != SECRET_WORD:
        # Counted over the lexical match set: every tenant's rows hold the other words.
        assert facets.get("metadata.tenant"), out


def test_tenant_token_refusals(live: Live, tenant_key: str) -> None:
    """Each refusal is a 401 saying why (and no more than the token's signer knows)."""
    def refusal(token: str) -> tuple[int, str]:
        status, out = _search(live, token, "lexical", "tea")
        return status, out["error"]["message"] if status != 200 else ""
    ok = lakehouse.tenant_token(tenant_key, filter={"metadata": {"tenant": "a"}})
    assert refusal(ok) == (200, "")
    assert refusal(lakehouse.tenant_token(tenant_key, expires_in=0.001)[:-2] + "xx")[0] == 401
    assert refusal(lakehouse.tenant_token(tenant_key, corpora=[NOTES])) == (
        401, f"tenant token's corpora claim goes past its key: {NOTES!r}")
    status, message = refusal(lakehouse.tenant_token(tenant_key, filter={"nope": 1}))
    assert status == 401 and message.startswith("tenant token's filter claim is not a filter")
    other = lakehouse.tenant_token("lhk_k1111111111111111_" + "y" * 43, "k1111111111111111")
    assert refusal(other) == (401, "tenant token of an unknown key")
    auth = {"Authorization": f"Bearer {ok}"}
    status, out = call(f"{live.url}/v1/vectors/corpora/{TENANTS}/items/a0", None, auth)
    assert (status, out["error"]["message"]) == (  # a tenant token searches only
        403, "reading an item needs the read action; this key has: search")


# ---- the learned ranker ----------------------------------------------------------------------

RANKED, RANKED_PB = "keys_rk", "keys_rk_pb"


@pytest.fixture(scope="module")
def ranked(live: Live) -> dict[str, Any]:
    """A corpus of two tenants' rows the ranker learns from, its right answers recorded in a
    playbook of their own, and the model the admin trained on them (with trees)."""
    rows = ranker_data.docs(tenants=("t1", "t2"))
    status, emb = call(f"{live.url}/v1/embed",
                       {"texts": [f"{r['title']}\n{r['text']}" for r in rows]}, live.auth)
    assert status == 200, emb
    status, out = call(f"{live.url}/v1/vectors/corpora", {"name": RANKED, "dim": emb["dim"],
                                                          "model": emb["model"]}, live.auth)
    assert status in (201, 409), out
    items = [{**r, "vector": v} for r, v in zip(rows, emb["vectors"], strict=True)]
    status, out = call(f"{live.url}/v1/vectors/corpora/{RANKED}/items",
                       {"items": items, "model": emb["model"]}, live.auth)
    assert status == 200, out
    for q, answer in ranker_data.records():
        status, out = call(f"{live.url}/v1/matrix/playbooks/record",
                           {"query_text": q, "answer_id": answer, "answer_corpus": RANKED,
                            "score": 1, "playbook_corpus": RANKED_PB}, live.auth)
        assert status == 200, out
    status, model = call(f"{live.url}/v1/matrix/ranker/train",
                         {"playbook_corpus": RANKED_PB, "corpora": [RANKED], "wait": True},
                         live.auth)
    assert status == 200 and model["used"], model
    return dict(model)


def test_a_model_of_corpora_a_key_cannot_see_never_ranks_its_searches(
        live: Live, keys: Keys, ranked: dict[str, Any]) -> None:
    body = {"query_text": "walrus?", "k": 10, "use_playbook": True, "playbook_corpus": RANKED_PB}
    status, out = call(f"{live.url}/v1/matrix/search", {**body, "corpora": [RANKED]}, live.auth)
    assert status == 200 and out["ranker"]["applied"] and out["ranker"]["id"] == ranked["id"]
    search_a = {"Authorization": keys.secrets["search"]}
    for corpora in (None, [A]):
        status, out = call(f"{live.url}/v1/matrix/search",
                           {**body, **({"corpora": corpora} if corpora else {})}, search_a)
        assert status == 200, out
        assert "ranker" not in out and all("ranker_score" not in h for h in out["hits"]), out
    status, out = call(f"{live.url}/v1/matrix/ranker?playbook_corpus={RANKED_PB}", None,
                       {"Authorization": keys.secrets["read"]})
    assert status == 200 and out["models"] == [], out
    feedback_a = {"Authorization": keys.secrets["feedback"]}
    status, out = call(f"{live.url}/v1/matrix/ranker/train",
                       {"playbook_corpus": RANKED_PB, "corpora": [RANKED]}, feedback_a)
    assert (status, out["error"]["code"], out["error"]["field"]) == (
        404, "corpus_not_found", "corpora"), out
    assert f"corpus {RANKED!r} not found" in out["error"]["message"]
    status, out = call(f"{live.url}/v1/matrix/ranker/train", {"playbook_corpus": RANKED_PB},
                       feedback_a)  # its records answer no corpus the key sees
    assert (status, out["error"]["code"], out["error"]["field"]) == (
        409, "no_records", "playbook_corpus"), out
    assert repr(RANKED) not in out["error"]["message"]  # the playbook's own name starts alike


@pytest.mark.parametrize("tenant", ["t1", "t2"])
def test_a_tenant_tokens_filter_holds_with_the_ranker_on(
        live: Live, ranked: dict[str, Any], tenant: str) -> None:
    key = _key(live, f"ranked {tenant}", ["search"], [RANKED])
    token = lakehouse.tenant_token(key["key"], filter={"metadata": {"tenant": tenant}},
                                   expires_in=600)
    for topic in ranker_data.TOPICS[:8]:
        status, out = call(f"{live.url}/v1/matrix/search",
                           {"query_text": ranker_data.question(topic), "k": 10,
                            "use_playbook": True, "playbook_corpus": RANKED_PB,
                            "explain": True}, {"Authorization": f"Bearer {token}"})
        assert status == 200, out
        assert out["ranker"]["applied"] and out["ranker"]["id"] == ranked["id"], out["ranker"]
        assert out["hits"] and all(h["metadata"]["tenant"] == tenant and h["corpus"] == RANKED
                                   for h in out["hits"]), out["hits"]


def test_cli_ranker_train_and_status_print_the_model_and_its_figures(
        live: Live, ranked: dict[str, Any]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_URL=live.url, LAKEHOUSE_TOKEN=live.token,
               LAKEHOUSE_CONFIG=str(ROOT / "lakehouse.toml"))

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "internal.cli.main", "ranker", *args],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    trained = cli("train", "--playbook-corpus", RANKED_PB, "--corpora", RANKED)
    head = trained.splitlines()[0]
    got = re.match(rf"model (\d+) \({RANKED_PB}: {RANKED}\): \d+ trees ranking searches with "
                   r"feedback \(alpha 1\)$", head)
    assert got is not None and int(got.group(1)) > ranked["id"], trained
    assert "cross-validated nDCG@10 on the records: boost alone" in trained
    status = cli("status", "--playbook-corpus", RANKED_PB)
    assert status.startswith(head) and "earlier versions:" in status, status
    assert str(ranked["id"]) in status.split("earlier versions:")[1]
    listed = json.loads(cli("status", "--playbook-corpus", RANKED_PB, "--json"))
    assert [m["current"] for m in listed["models"][:2]] == [True, False], listed


# ---- MCP -----------------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def mcp_session(live: Live, header: str) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers={"Authorization": header},
                                  timeout=httpx2.Timeout(30, read=300)) as client, \
            streamable_http_client(f"{live.url}/mcp", http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_mcp_with_a_scoped_key_sees_only_its_corpora(live: Live, keys: Keys) -> None:
    async with mcp_session(live, keys.secrets["search"]) as session:
        found = await session.call_tool("search", {"query": "tea", "k": 20})
        assert not found.is_error
        text = json.dumps(found.structured_content)
        assert A in text and B not in text and GUIDES not in text and NOTES not in text
    header = _key(live, "read+search A", ["read", "search"], [A])["key"]
    async with mcp_session(live, f"Bearer {header}") as session:
        listed = await session.call_tool("list_corpora", {})
        assert not listed.is_error
        names = json.dumps(listed.structured_content)
        assert A in names and B not in names and GUIDES not in names


def test_cli_keys_and_revocation_within_a_second(live: Live) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_URL=live.url, LAKEHOUSE_TOKEN=live.token,
               LAKEHOUSE_CONFIG=str(ROOT / "lakehouse.toml"))

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "internal.cli.main", "keys", *args],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    created = json.loads(cli("create", "cli key", "--actions", "read", "--corpora", A, "--json"))
    assert created["key"].startswith("lhk_") and created["id"] in cli("list")
    assert created["key"] not in cli("list")
    auth = {"Authorization": f"Bearer {created['key']}"}
    assert call(f"{live.url}/v1/vectors/corpora", None, auth)[0] == 200
    cli("revoke", created["id"])
    time.sleep(1.0)  # the gateway re-reads a key at most 0.5 s after it last did
    assert call(f"{live.url}/v1/vectors/corpora", None, auth)[0] == 401
    # The README's three commands, as written there, after its tour made the two corpora
    # (a key for a corpus that does not exist is refused without --allow-missing).
    refused = subprocess.run(
        [sys.executable, "-m", "internal.cli.main", "keys", "create", "support-agent",
         "--actions", "search", "--corpora", "handbook,tickets"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "no corpus 'handbook', 'tickets'" in refused.stderr
    for name in ("handbook", "tickets"):
        assert call(f"{live.url}/v1/vectors/corpora", {"name": name, "dim": 4},
                    live.auth)[0] in (201, 409)
    printed = cli("create", "support-agent", "--actions", "search", "--corpora",
                  "handbook,tickets").splitlines()
    key_id = printed[0].split()[1]
    assert printed[0] == f"key {key_id} (search on handbook, tickets)", printed
    assert printed[1].startswith(f"lhk_{key_id}_") and "shown this once" in printed[2]
    listed = cli("list")
    assert key_id in listed and "handbook,tickets" in listed and printed[1] not in listed
    assert cli("revoke", key_id).strip() == f"revoked {key_id}"
    for name in ("handbook", "tickets"):
        call(f"{live.url}/v1/vectors/corpora/{name}", None, live.auth, method="DELETE")


DAEMONS = {"vectord": ("/v1/vectors/", "/v1/keys", "/internal/"), "matrixd": ("/v1/matrix/",),
           "embedd": ("/v1/embed",), "syncd": ("/v1/sync/",)}


def _port(live: Live, daemon: str) -> int:
    """The daemon's port, from the effective config its log starts with."""
    section = "sync" if daemon == "syncd" else daemon
    for line in (live.tmp / "logs" / f"{daemon}.log").read_text().splitlines():
        if line.startswith("{") and '"config"' in line:
            row = json.loads(line)
            if row.get("event") == "config":
                return int(row["config"][section]["port"])
    raise AssertionError(f"no config line in {daemon}.log")


def test_matrix_through_each_daemons_own_port(live: Live, keys: Keys) -> None:
    """A key's secret is the gateway's to check: on a daemon's port only the admin tokens
    (and the stack's service token) open anything; a scope header a caller writes itself
    opens nothing either."""
    unexpected_allow, errors5xx, cells = [], [], 0
    forged = access.encode(access.Scope(key_id="x", actions=("admin",), corpora=("*",)))
    for daemon, prefixes in DAEMONS.items():
        base = f"http://127.0.0.1:{_port(live, daemon)}"
        rules = [r for r in access.RULES if r.path.startswith(prefixes) and r.method != "*"]
        for rule in rules:
            method = rule.method.lower()
            if (method, rule.path) in DESTRUCTIVE:
                continue
            for cred, header in keys.secrets.items():
                for corpus in (A, B):
                    path, body = _requests(rule.path, method, corpus)
                    headers = {"Authorization": header} if header else {}
                    if cred != "admin":
                        headers[access.SCOPE_HEADER] = forged
                    status, text = raw_call(f"{base}{path}", rule.method, body, headers)
                    cells += 1
                    where = f"{daemon} {rule.method} {path} as {cred}: {status} {text[:160]}"
                    if status >= 500 and not _missing(status, text, corpus):
                        errors5xx.append(where)
                    allowed = not _denied(status, text, corpus)
                    expected = cred == "admin" and access.INTERNAL not in rule.actions
                    if allowed and not expected:
                        unexpected_allow.append(where)
    print(f"\ndaemon ports matrix: {cells} cells, {len(unexpected_allow)} unexpected allows, "
          f"{len(errors5xx)} 5xx")
    assert not unexpected_allow, unexpected_allow
    assert not errors5xx, errors5xx


def test_console_with_a_scoped_key(live: Live, keys: Keys, browser: WebDriver) -> None:  # noqa: F811
    """Only the key's corpora in the picker and the hits; no feedback buttons and no sync
    page for a key that may only search."""
    browser.get(f"{live.url}/")
    dialog = wait(browser).until(ec.visibility_of_element_located((By.ID, "token-dialog")))
    dialog.find_element(By.ID, "token").send_keys(keys.secrets["search"].removeprefix("Bearer "))
    dialog.find_element(By.ID, "token-ok").click()
    wait(browser).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    offered = {e.get_attribute("value") for e in browser.find_elements(
        By.CSS_SELECTOR, '#corpus-list input[name="corpus"]')}
    assert offered == {A}
    hits = search(browser, "tea", k=5)
    assert hits and {h.get_attribute("data-corpus") for h in hits} == {A}
    assert not browser.find_elements(By.CSS_SELECTOR, "#hits button.right")
    assert not browser.find_element(By.ID, "nav-sync").is_displayed()


# Last in this module: the logs of everything above (and of the console tests before it).
SECRET_RE = re.compile(r"lhk_k[0-9a-f]{16}_[A-Za-z0-9_-]{20,}")
JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
KEY_ID_RE = re.compile(r"^(k[0-9a-f]{16}|admin|service)$")
UNAUTHENTICATED = ("/healthz", "/readyz", "/openapi.json", "/console/", "/favicon.ico")


def test_no_secret_in_any_log_and_a_key_id_on_every_request_line(live: Live, keys: Keys) -> None:
    """Every log of the stack: no key's secret (any presented, valid or not), no tenant
    token, no admin token; every authenticated request's line names its key id."""
    files = [*(live.tmp / "logs").glob("*.log"), live.tmp / "up.log"]
    logs = {p.name: p.read_text(errors="replace") for p in files}
    assert len(logs) >= 6, sorted(logs)
    for name, text in logs.items():
        assert not SECRET_RE.search(text), (name, SECRET_RE.findall(text)[:3])
        assert not JWT_RE.search(text), (name, JWT_RE.findall(text)[:3])
        assert live.token not in text, name
    requests, unnamed, named = 0, [], set()
    for name, text in logs.items():
        for line in text.splitlines():
            row = json.loads(line) if line.startswith("{") else {}
            if row.get("event") != "request" or row["status"] == 401:
                continue
            if row["path"] == "/" or row["path"].startswith(UNAUTHENTICATED):
                continue
            requests += 1
            named.add(row.get("key_id"))
            if not KEY_ID_RE.match(str(row.get("key_id"))):
                unnamed.append((name, row))
    assert requests > 500 and not unnamed, (requests, unnamed[:5])
    for action in ("search", "read", "write", "feedback"):  # each key this module used
        assert api_keys.id_of(keys.secrets[action].removeprefix("Bearer ")) in named
