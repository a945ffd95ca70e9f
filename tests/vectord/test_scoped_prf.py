"""PRF under a tenant token's forced filter: the expansion terms themselves, observed.

A hit list can look clean while the expanded query carries a word of another tenant's
rows (the token's user would learn it from what the query then finds); so this test reads
the terms RM3 chose. vectord is served in-process with auth on and asked as the gateway
asks for a tenant token (the service token with the token's scope in `Lakehouse-Scope`);
an observer records what `feedback.expanded_stats` returns (the real function runs; its
answer is only read). Every tenant has words of its own: an expansion term is always a
word of a row the filter admits, or the query's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from internal.common import access
from internal.config import Config
from internal.vectord.lexical import sql_index
from internal.vectord.search import feedback
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, make_corpus, unit

ADMIN, SERVICE = "prf-admin-token", "prf-service-token"
DIM = 8
# Made-up words no stemmer shortens (each is its own lexeme), one set per tenant.
WORDS = {"a": ["ambrok", "adwix", "arplok", "akrup"],
         "b": ["bzorg", "bluvak", "brintox", "bexump"],
         "c": ["cworf", "cradnik", "clovup", "cyzmok"]}
SHARED = ["tarvok", "mivdap", "quornix", "peldok"]
PRF = {"docs": 5, "terms": 10, "weight": 1.0}


@pytest.fixture(scope="module")
async def scoped_vectord(base_cfg: Config) -> AsyncIterator[str]:
    cfg = with_section(base_cfg, "gateway", tokens=(ADMIN,), service_token=SERVICE)
    from internal.vectord.server import make_app

    server = await serve(make_app(cfg))
    yield url_of(server)
    await server.close()


@pytest.fixture(scope="module")
def expansions() -> Iterator[list[list[str] | None]]:
    """Each expansion's lexemes (None: no expansion), in the order the searches ran."""
    seen: list[list[str] | None] = []
    real = feedback.expanded_stats

    async def observed(*args: Any, **kwargs: Any) -> sql_index.QueryStats | None:
        got = await real(*args, **kwargs)
        seen.append(None if got is None else list(got.lexemes))
        return got

    feedback.expanded_stats = observed
    try:
        yield seen
    finally:
        feedback.expanded_stats = real


async def _load(base: str, rows: list[tuple[str, list[str]]]) -> str:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN}"}) as http:
        name = await make_corpus(http, base, dim=DIM)
        items = [{"id": f"r{i}", "vector": unit(DIM, 500 + i), "text": " ".join(words),
                  "metadata": {"tenant": tenant}} for i, (tenant, words) in enumerate(rows)]
        status, out = await call(http, "POST", f"{base}/v1/vectors/corpora/{name}/items",
                                 {"items": items})
        assert status == 200, out
    return name


async def _expansion(base: str, seen: list[list[str] | None], corpus: str, route: str,
                     query: list[str], tenant: str | None) -> tuple[list[str] | None, Any]:
    """The expansion's lexemes and the answer of one hybrid search with PRF on, as the
    gateway sends it for a tenant token of `tenant` (None: a key without a filter)."""
    scope = access.Scope(key_id="k" + "7" * 16, actions=("search",), corpora=(corpus,),
                         filter=None if tenant is None else {"metadata": {"tenant": tenant}})
    headers = {"Authorization": f"Bearer {SERVICE}", access.SCOPE_HEADER: access.encode(scope)}
    body: dict[str, Any] = {"mode": "hybrid", "query_text": " ".join(query),
                            "query_vector": unit(DIM, 7), "k": 10, "candidates": 20, "prf": PRF}
    url = f"{base}/v1/vectors/corpora/{corpus}/search"
    if route == "multi":
        url, body["corpora"] = f"{base}/v1/vectors/search", [corpus]
    seen.clear()
    async with aiohttp.ClientSession(headers=headers) as http:
        status, out = await call(http, "POST", url, body)
    assert status == 200, out
    assert len(seen) <= 1, seen
    return (seen[0] if seen else None), out


def _hits(out: Any) -> list[dict[str, Any]]:
    return list(out["hits"])


async def test_the_observer_sees_other_tenants_words_without_a_filter(
        scoped_vectord: str, expansions: list[list[str] | None]) -> None:
    """The observation can fail: with no filter the expansion takes tenant b's words; with
    tenant a's filter, only a's."""
    rows = [("b", ["tarvok", "bzorg", "bluvak"]), ("b", ["tarvok", "bzorg", "brintox"]),
            ("a", ["tarvok", "ambrok", "adwix"]), ("c", ["mivdap", "cworf"]),
            ("c", ["quornix", "cradnik"]), ("a", ["peldok", "arplok"]),
            ("c", ["peldok", "clovup"]), ("a", ["mivdap", "akrup"]),
            ("c", ["quornix", "cyzmok"]), ("a", ["peldok", "ambrok"])]
    corpus = await _load(scoped_vectord, rows)
    for route in ("single", "multi"):
        open_terms, _ = await _expansion(scoped_vectord, expansions, corpus, route, ["tarvok"], None)
        assert open_terms is not None and "bzorg" in open_terms, open_terms
        a_terms, out = await _expansion(scoped_vectord, expansions, corpus, route, ["tarvok"], "a")
        assert a_terms is not None and "ambrok" in a_terms, a_terms
        assert not set(a_terms) & set(WORDS["b"] + WORDS["c"]), a_terms
        assert {h["metadata"]["tenant"] for h in _hits(out)} == {"a"}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                               st.lists(st.sampled_from(SHARED), min_size=1, max_size=2),
                               st.lists(st.integers(0, 3), min_size=1, max_size=4)),
                     min_size=4, max_size=14),
       query=st.lists(st.sampled_from(SHARED), min_size=1, max_size=2, unique=True),
       tenant=st.sampled_from(["a", "b", "c"]),
       route=st.sampled_from(["single", "multi"]))
async def test_expansion_terms_come_only_from_rows_the_token_may_see(
        scoped_vectord: str, expansions: list[list[str] | None],
        rows: list[tuple[str, list[str], list[int]]], query: list[str], tenant: str,
        route: str) -> None:
    texts = [(t, shared + [WORDS[t][i] for i in own]) for t, shared, own in rows]
    corpus = await _load(scoped_vectord, texts)
    visible = {w for t, words in texts if t == tenant for w in words}
    terms, out = await _expansion(scoped_vectord, expansions, corpus, route, query, tenant)
    assert set(terms or []) <= visible | set(query), (terms, visible)
    assert all(h["metadata"]["tenant"] == tenant for h in _hits(out)), out
