"""The in-memory lexical index (postings.py, lexindex.py) against the SQL reference scorer.

Two vectord apps over one PostgreSQL: one scores BM25 from its in-memory index
(`lexical_engine = "memory"`, the default), the other inside PostgreSQL (`"sql"`, the
reference). Every search must give the same ids in the same order with the same scores,
also after writes made through a third app (another replica's cache must catch up), in
federated searches, with filters, `include`, hybrid fusion and feedback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import numpy as np
import pytest

from internal.config import Config
from internal.vectord.lexical import postings, postings_union, versions
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
WORDS = ("solar wind battery grid storage price winter turbine panel cell voltage "
         "current charge house roof north south energy power plant coal gas hydro "
         "river dam lake cloud rain sun storm heat cold").split()


@pytest.fixture(scope="module")
async def apps(base_cfg: Config) -> AsyncIterator[dict[str, str]]:
    from internal.vectord.server import make_app

    out: dict[str, str] = {}
    servers = []
    for name, engine in (("memory", "memory"), ("sql", "sql"), ("writer", "memory")):
        server = await serve(make_app(with_section(base_cfg, "vectord", lexical_engine=engine)))
        servers.append(server)
        out[name] = url_of(server)
    yield out
    for server in servers:
        await server.close()


def _docs(seed: int, n: int, start: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, len(WORDS) + 1)
    zipf /= zipf.sum()
    out = []
    for i in range(start, start + n):
        words = rng.choice(WORDS, size=int(rng.integers(3, 30)), p=zipf)
        title = " ".join(rng.choice(WORDS, size=2))
        out.append({"id": f"d{i:05d}", "vector": unit(8, i), "title": title,
                    "text": " ".join(words), "tags": [str(rng.choice(["a", "b", "c"]))]})
    return out


async def _upsert(http: aiohttp.ClientSession, base: str, name: str,
                  items: list[dict[str, Any]]) -> None:
    status, body = await call(http, "POST", f"{base}{C}/{name}/items", {"items": items})
    assert status == 200, body


async def _search(http: aiohttp.ClientSession, base: str, corpora: list[str],
                  **req: Any) -> list[tuple[str, str, float]]:
    if len(corpora) == 1 and "include" not in req:
        status, body = await call(http, "POST", f"{base}{C}/{corpora[0]}/search", req)
    else:
        status, body = await call(http, "POST", f"{base}/v1/vectors/search",
                                  {"corpora": corpora, **req})
    assert status == 200, body
    return [(h.get("corpus", corpora[0]), h["id"],
             float(h.get("merge_score") or h.get("score") or 0.0)) for h in body["hits"]]


async def _same(http: aiohttp.ClientSession, apps: dict[str, str], corpora: list[str],
                **req: Any) -> list[tuple[str, str, float]]:
    got = await _search(http, apps["memory"], corpora, **req)
    want = await _search(http, apps["sql"], corpora, **req)
    assert [(c, i) for c, i, _ in got] == [(c, i) for c, i, _ in want], req
    assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], rel=1e-9, abs=1e-12)
    return got


QUERIES = ["solar wind", "battery storage price", "winter", "coal gas plant power",
           "river dam lake", "storm heat cold rain sun", "voltage", "nothing matches this",
           "energy energy power"]


async def test_lexical_equals_sql_reference(apps: dict[str, str],
                                            http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, _docs(1, 300))
    for q in QUERIES:
        for k in (1, 10, 50):
            await _same(http, apps, [name], mode="lexical", query_text=q, k=k)
        await _same(http, apps, [name], mode="lexical", query_text=q, k=10,
                    filter={"tags_any": ["b"]})
        await _same(http, apps, [name], mode="lexical", query_text=q, k=10,
                    field_weights={"title": 2.0, "text": 1.0, "tags": 0.0})


async def test_hybrid_and_feedback_equal_sql_reference(apps: dict[str, str],
                                                       http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, _docs(2, 200))
    for i, q in enumerate(QUERIES):
        base = {"mode": "hybrid", "query_text": q, "query_vector": unit(8, 1000 + i), "k": 10}
        await _same(http, apps, [name], **base)
        await _same(http, apps, [name], **base, prf={"docs": 0})
        await _same(http, apps, [name], **base, filter={"tags_any": ["a", "c"]})
        await _same(http, apps, [name], mode="hybrid", query_text=q, k=10)
        await _same(http, apps, [name], **base, include=[
            {"corpus": name, "id": "d00007"}, {"corpus": name, "id": "d00150", "factor": 1.3},
            {"corpus": name, "id": "nope"}])
        await _same(http, apps, [name], mode="lexical", query_text=q, k=5, include=[
            {"corpus": name, "id": "d00007"}, {"corpus": name, "id": "nope"}])


async def test_federated_equals_sql_reference(apps: dict[str, str],
                                              http: aiohttp.ClientSession) -> None:
    names = [await make_corpus(http, apps["writer"]) for _ in range(3)]
    for j, name in enumerate(names):
        await _upsert(http, apps["writer"], name, _docs(10 + j, 80, start=100 * j))
    for i, q in enumerate(QUERIES):
        await _same(http, apps, names, mode="lexical", query_text=q, k=15)
        await _same(http, apps, names, mode="hybrid", query_text=q, k=15,
                    query_vector=unit(8, 2000 + i))


async def test_writes_through_another_replica_are_seen(apps: dict[str, str],
                                                       http: aiohttp.ClientSession) -> None:
    """The memory app's cache is warm; writes go through another app; its next search
    sees each one (update, new lexeme, delete) exactly as the SQL reference does."""
    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, _docs(3, 100))
    for q in QUERIES:
        await _same(http, apps, [name], mode="lexical", query_text=q, k=20)
    # A new, rare word (never searched before) and a changed document.
    await _upsert(http, apps["writer"], name, [
        {"id": "d00003", "vector": unit(8, 3), "text": "zeppelin solar solar solar"},
        {"id": "new1", "vector": unit(8, 9), "text": "zeppelin over the river"}])
    got = await _same(http, apps, [name], mode="lexical", query_text="zeppelin solar", k=20)
    assert {"d00003", "new1"} <= {i for _, i, _ in got}
    status, _ = await call(http, "POST", f"{apps['writer']}{C}/{name}/items/delete",
                           {"ids": ["new1"]})
    assert status == 200
    got = await _same(http, apps, [name], mode="lexical", query_text="zeppelin", k=20)
    assert [i for _, i, _ in got] == ["d00003"]
    for q in QUERIES:
        await _same(http, apps, [name], mode="lexical", query_text=q, k=20)


async def _from_cache(http: aiohttp.ClientSession, base: str) -> int:
    status, body = await call(http, "GET", f"{base}/readyz")
    assert status == 200, body
    return int(body["components"]["lexical_index"]["from_cache"])


async def test_a_repeated_text_sees_writes_made_since(apps: dict[str, str],
                                                      http: aiohttp.ClientSession) -> None:
    """A text searched before scores from the cache without a round trip first and checks
    the versions with the hits it reads: a write in between (through another app) is
    seen, in every mode, over one corpus or several, with hits or with none."""
    names = [await make_corpus(http, apps["writer"]) for _ in range(2)]
    for j, name in enumerate(names):
        # 150 documents in the first: feedback runs by default from 100 (its documents'
        # lexeme counts and dfs then come from the cache too).
        await _upsert(http, apps["writer"], name, _docs(20 + j, 150 if j == 0 else 60,
                                                        start=1000 * j))
    searches: list[tuple[list[str], dict[str, Any]]] = [
        ([names[0]], {"mode": "lexical", "query_text": "solar quokka", "k": 5}),
        (names, {"mode": "lexical", "query_text": "solar quokka", "k": 5}),
        ([names[0]], {"mode": "hybrid", "query_text": "solar quokka", "k": 5,
                      "query_vector": unit(8, 77)}),
        ([names[0]], {"mode": "hybrid", "query_text": "storm solar", "k": 5,
                      "query_vector": unit(8, 78)}),
        (names, {"mode": "hybrid", "query_text": "wind power", "k": 5,
                 "query_vector": unit(8, 79)}),
        ([names[1]], {"mode": "lexical", "query_text": "quokka", "k": 5}),  # no hit yet
    ]
    before = await _from_cache(http, apps["memory"])
    for corpora, req in searches:
        for _ in range(2):  # the second time from the cache
            await _same(http, apps, corpora, **req)
    assert await _from_cache(http, apps["memory"]) >= before + len(searches)
    # A feedback document changed: its new lexemes count from the next search on.
    top = await _search(http, apps["memory"], [names[0]], **searches[3][1])
    await _upsert(http, apps["writer"], names[0], [
        {"id": top[0][1], "vector": unit(8, 78), "text": "storm solar zebra zebra zebra"}])
    for corpora, req in searches:
        await _same(http, apps, corpora, **req)
    for round_, name in enumerate(names):
        await _upsert(http, apps["writer"], name, [
            {"id": f"q{round_}", "vector": unit(8, 5), "text": "quokka quokka solar"}])
        for corpora, req in searches:
            got = await _same(http, apps, corpora, **req)
            if name in corpora and "quokka" in req["query_text"]:
                assert (name, f"q{round_}") in {(c, i) for c, i, _ in got}, req


async def _lexical_index(http: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    status, body = await call(http, "GET", f"{base}/readyz")
    assert status == 200, body
    return dict(body["components"]["lexical_index"])


async def test_a_small_corpus_held_whole_reads_nothing_and_sees_writes(
        apps: dict[str, str], http: aiohttp.ClientSession) -> None:
    """A small corpus is loaded whole in the background after a search uses it; then a
    new query, feedback and other corpora's searches read no postings for it, and writes
    made through another app are still seen exactly (the lexemes they touched are read
    again at the new version, the corpus stays whole)."""
    import asyncio

    names = [await make_corpus(http, apps["writer"]) for _ in range(2)]
    for j, name in enumerate(names):
        await _upsert(http, apps["writer"], name, _docs(40 + j, 150, start=1000 * j))
    before = (await _lexical_index(http, apps["memory"]))["whole_loads"]
    await _same(http, apps, names, mode="lexical", query_text="solar", k=10)
    for _ in range(100):
        if (await _lexical_index(http, apps["memory"]))["whole_loads"] >= before + 2:
            break
        await asyncio.sleep(0.05)
    index = await _lexical_index(http, apps["memory"])
    assert index["whole_loads"] >= before + 2, index
    loads = index["loads"]
    for i, q in enumerate(QUERIES):  # new texts, feedback on: nothing more is read
        await _same(http, apps, names, mode="hybrid", query_text=q, k=10,
                    query_vector=unit(8, 3000 + i))
        await _same(http, apps, [names[0]], mode="hybrid", query_text=q, k=10,
                    query_vector=unit(8, 3000 + i))
    assert (await _lexical_index(http, apps["memory"]))["loads"] == loads
    await _upsert(http, apps["writer"], names[0], [
        {"id": "d01003", "vector": unit(8, 3), "text": "yodel solar solar"},
        {"id": "w1", "vector": unit(8, 9), "text": "yodel over the dam"}])
    got = await _same(http, apps, names, mode="lexical", query_text="yodel solar", k=20)
    assert {(names[0], "d01003"), (names[0], "w1")} <= {(c, i) for c, i, _ in got}
    status, _ = await call(http, "POST", f"{apps['writer']}{C}/{names[0]}/items/delete",
                           {"ids": ["w1"]})
    assert status == 200
    got = await _same(http, apps, names, mode="lexical", query_text="yodel", k=20)
    assert [i for _, i, _ in got] == ["d01003"]
    for i, q in enumerate(QUERIES):
        await _same(http, apps, names, mode="hybrid", query_text=q, k=10,
                    query_vector=unit(8, 3100 + i))
    assert (await _lexical_index(http, apps["memory"]))["whole"] >= 2


def test_whole_loads_only_what_fits() -> None:
    small = postings.Stats(n=500, sums=(1_000, 60_000, 500))
    assert postings.fits_whole(small, 0, 2048 * 2**20)
    assert not postings.fits_whole(small, 0, 2 * 2**20)  # over half the budget
    big = postings.Stats(n=100_000, sums=(0, postings.WHOLE_MAX_TOKENS + 1, 0))
    assert not postings.fits_whole(big, 0, 2**40)
    assert not postings.fits_whole(postings.Stats(), 0, 2**40)  # nothing to load


def test_a_whole_index_knows_absent_lexemes_until_one_is_evicted() -> None:
    cache = postings.Cache(budget_bytes=10**9)
    ix = cache.corpus(7)
    ix.moved_to(3, postings.Stats(n=2, sums=(0, 4, 0)))
    tf = np.array([[0, 1, 0], [0, 2, 0]], dtype=np.uint16)
    dl = np.array([[0, 1, 0], [0, 3, 0]], dtype=np.int32)
    ix.put("solar", ["a", "b"], tf, dl)
    ix.put("wind", ["b"], tf[1:], dl[1:])
    ix.whole = True
    assert ix.missing(["solar", "absent"]) == []
    assert ix.df("absent") == 0.0
    view = ix.view(["solar"])
    assert view.df("wind") == 1.0 and view.df("absent") == 0.0  # through its index
    ix.moved_to(4, ix.stats)
    assert view.df("wind") is None  # its index moved on: ask PostgreSQL
    cache.touch_all([ix], ["solar", "wind"])
    cache.budget = 0
    cache.evict(set())
    assert not ix.whole and ix.missing(["solar"]) == ["solar"]


async def test_a_cache_past_the_change_log_starts_over(apps: dict[str, str],
                                                       http: aiohttp.ClientSession) -> None:
    """More single-item writes than the log keeps, while the memory app is not looking."""
    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, _docs(4, 50))
    await _same(http, apps, [name], mode="lexical", query_text="solar wind", k=20)
    for doc in _docs(5, 300, start=1000):
        await _upsert(http, apps["writer"], name, [doc])
    for q in QUERIES:
        await _same(http, apps, [name], mode="lexical", query_text=q, k=20)


async def test_deleted_and_recreated_corpus(apps: dict[str, str],
                                            http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, _docs(6, 40))
    await _same(http, apps, [name], mode="lexical", query_text="solar", k=5)
    status, _ = await call(http, "DELETE", f"{apps['writer']}{C}/{name}")
    assert status == 200
    status, body = await call(http, "POST", f"{apps['memory']}{C}/{name}/search",
                              {"mode": "lexical", "query_text": "solar", "k": 5})
    assert status == 404, body
    status, _ = await call(http, "POST", f"{apps['writer']}{C}",
                           {"name": name, "dim": 8, "language": "english"})
    assert status == 201
    await _upsert(http, apps["writer"], name, _docs(7, 10))
    await _same(http, apps, [name], mode="lexical", query_text="solar", k=5)


def test_top_breaks_ties_by_id_in_byte_order() -> None:
    ix = postings.CorpusIndex(1)
    ids = ["b", "a", "é", "Z", "c"]
    ix.put("x", ids, np.ones((5, 3), dtype=np.uint16), np.full((5, 3), 4, dtype=np.int32))
    s = postings.scores(ix, ["x"], [1.0], 12.0, 1.2, 0.75, (1.0, 1.0, 1.0))
    assert [i for i, _ in postings.top(ix, s, 3)] == ["Z", "a", "b"]
    assert [i for i, _ in postings.top(ix, s, 10)] == ["Z", "a", "b", "c", "é"]


def test_top_compares_scores_rounded_as_sql_does() -> None:
    """Scores 4e-13 apart round to the same 1e-12 value: a tie, broken by id, as the SQL
    scorer's round(x, 12) would order them (the array itself is not rounded)."""
    ix = postings.CorpusIndex(1)
    ix.put("x", ["b", "a", "c"], np.ones((3, 3), dtype=np.uint16),
           np.full((3, 3), 4, dtype=np.int32))
    s = np.array([1.0000000000004, 1.0000000000001, 0.5])
    assert postings.top(ix, s, 1) == [("a", 1.0)]
    assert postings.top(ix, s, 2) == [("a", 1.0), ("b", 1.0)]
    assert postings.rounded(1.0000000000004) == 1.0


def test_cache_evicts_least_recently_used_within_budget() -> None:
    cache = postings.Cache(budget_bytes=100 * postings.ITEM_BYTES
                           + 3 * (postings.ENTRY_OVERHEAD + postings.POSTING_BYTES * 100))
    ix = cache.corpus(1)
    for t in ("a", "b", "c", "d"):
        ix.put(t, [f"i{j}" for j in range(100)], np.ones((100, 3), dtype=np.uint16),
               np.ones((100, 3), dtype=np.int32))
        cache.touch_all([ix], [t])
    cache.evict(keep={(1, "d")})
    assert "d" in ix.entries and "a" not in ix.entries
    assert cache.nbytes <= cache.budget


async def test_a_database_of_the_previous_layout_is_migrated(
        base_cfg: Config, pg_dsn: str, http: aiohttp.ClientSession) -> None:
    """A corpus written before the versions and change log existed: vectord migrates the
    schema on start, and its in-memory index answers as the SQL reference, also after
    a write."""
    import psycopg

    from internal.vectord.server import make_app

    writer = await serve(make_app(base_cfg))
    try:
        base = url_of(writer)
        name = await make_corpus(http, base)
        await _upsert(http, base, name, _docs(8, 60))
    finally:
        await writer.close()
    # Back to the previous layout: no versions, no change log, the old trigger function.
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("DROP TABLE vectord_lex_versions, vectord_lex_changes")
        await conn.execute("DELETE FROM schema_migrations WHERE component = 'vectord' "
                           "AND version >= 2")
    from internal.vectord.server import make_app as make

    servers = [await serve(make(with_section(base_cfg, "vectord", lexical_engine=e)))
               for e in ("memory", "sql")]
    try:
        apps = {"memory": url_of(servers[0]), "sql": url_of(servers[1])}
        for q in QUERIES:
            await _same(http, apps, [name], mode="lexical", query_text=q, k=10)
        await _upsert(http, apps["memory"], name, [
            {"id": "d00001", "vector": unit(8, 1), "text": "zeppelin solar"}])
        got = await _same(http, apps, [name], mode="lexical", query_text="zeppelin", k=10)
        assert [i for _, i, _ in got] == ["d00001"]
    finally:
        for server in servers:
            await server.close()


async def test_twenty_writers_and_concurrent_searches(apps: dict[str, str],
                                                      http: aiohttp.ClientSession) -> None:
    """20 writers upsert overlapping batches while searches run on the memory app: every
    request succeeds, and once the writes are acknowledged the memory app's scores equal
    the reference's (statistics exact, nothing stale in the cache)."""
    import asyncio

    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, _docs(20, 50))

    def batch(seed: int) -> list[dict[str, Any]]:
        docs = _docs(100 + seed, 15, start=int(np.random.default_rng(seed).integers(0, 40)))
        return docs

    async def search(q: str) -> int:
        status, _ = await call(http, "POST", f"{apps['memory']}{C}/{name}/search",
                               {"mode": "hybrid", "query_text": q, "query_vector": unit(8, 5),
                                "k": 10})
        return status

    results = await asyncio.gather(
        *(call(http, "POST", f"{apps['writer']}{C}/{name}/items", {"items": batch(s)})
          for s in range(20)),
        *(search(q) for q in QUERIES * 4))
    assert all((r[0] if isinstance(r, tuple) else r) == 200 for r in results), results
    for q in QUERIES:
        await _same(http, apps, [name], mode="lexical", query_text=q, k=30)
        await _same(http, apps, [name], mode="hybrid", query_text=q, k=10,
                    query_vector=unit(8, 5))


async def test_query_lexemes_read_from_tsvector_text_equal_postgres(pg_dsn: str) -> None:
    """parse_tsvector reads what unnest(tsvector) gives, quotes, backslashes and all."""
    import psycopg

    from internal.vectord.lexical.memory_index import parse_tsvector

    texts = ["vitamin D and bone density", "O'Brien's \\\\server\\share isn't 'quoted'",
             "naïve café Straße 東京 emoji 🙂 x2 3.14 foo@bar.com http://a.b/c?d=e",
             "the the the running runs ran", "", "''' \\\\ '' \\", "Häuser und Bäume",
             "a" * 3000 + " word"]
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        for lang in (["english"], ["simple"], ["german", "english"]):
            for text in texts:
                row = await (await conn.execute(
                    "SELECT ARRAY(SELECT to_tsvector(l, %(q)s)::text "
                    "FROM unnest(%(langs)s::regconfig[]) l)", {"q": text, "langs": lang}
                )).fetchone()
                want = await (await conn.execute(
                    "SELECT x.lexeme COLLATE \"C\", max(cardinality(x.positions))::float8 "
                    "FROM unnest(%(langs)s::regconfig[]) l, unnest(to_tsvector(l, %(q)s)) x "
                    "GROUP BY 1 ORDER BY 1", {"q": text, "langs": lang})).fetchall()
                assert row is not None
                lexemes, qtf = parse_tsvector(row[0])
                assert list(zip(lexemes, qtf, strict=True)) == [(str(a), float(b))
                                                                for a, b in want], (lang, text)


def test_union_scores_are_the_corpora_scores_laid_end_to_end() -> None:
    """Several corpora scored as one give each corpus's very floats, and the union's
    top n is the corpora's top lists merged by score, then id, then position."""
    import numpy as np

    from internal.vectord.lexical import postings

    rng = np.random.default_rng(3)
    corpora = []
    for c in range(4):
        ix = postings.CorpusIndex(c)
        ix.version = 1
        for t in ("alpha", "beta", "gamma"):
            n = int(rng.integers(0, 40))
            ids = [f"d{int(i)}" for i in rng.choice(60, size=n, replace=False)]
            tf = rng.integers(0, 4, size=(n, 3)).astype(np.uint16)
            tf[:, 1] += 1
            dl = rng.integers(5, 50, size=(n, 3)).astype(np.int32)
            for j, item in enumerate(ids):  # an item has one length whatever the lexeme
                if item in ix.ord_of:
                    dl[j] = ix.dl[ix.ord_of[item]]
            ix.put(t, ids, tf, dl)
        corpora.append(ix)
    lex, w, avg = ["alpha", "beta", "gamma"], [1.3, 0.7, 2.1], 21.5
    cache = postings_union.UnionCache()
    for _ in range(2):  # the second time from the cache
        s = postings_union.union_scores(corpora, lex, w, avg, 1.2, 0.75, cache)
        start = postings_union.offsets(corpora)
        for i, ix in enumerate(corpora):
            alone = postings.scores(ix, lex, w, avg, 1.2, 0.75, (1.0, 1.0, 1.0))
            assert np.array_equal(s[start[i]:start[i + 1]], alone)
        merged = sorted(((-sc, item, i) for i, ix in enumerate(corpora)
                         for item, sc in postings.top(ix, postings.scores(
                             ix, lex, w, avg, 1.2, 0.75, (1.0, 1.0, 1.0)), 25)))[:25]
        assert postings_union.union_top(corpora, s, 25) == [(i, item, -neg) for neg, item, i in merged]


def test_accumulate_gives_the_floats_of_adding_term_by_term() -> None:
    """One bincount over the terms end to end equals `out[ords] += values` a term at a
    time, bit for bit (the SQL-reference tests rely on the very floats)."""
    rng = np.random.default_rng(5)
    size = 20_000
    terms = []
    for _ in range(12):
        ords = np.sort(rng.choice(size, size=int(rng.integers(1, 9_000)), replace=False))
        terms.append((ords.astype(np.int32), rng.random(ords.size) * float(rng.integers(1, 9))))
    want = np.zeros(size, dtype=np.float64)
    for ords, vals in terms:
        want[ords] += vals
    assert np.array_equal(postings.accumulate(size, terms), want)
    assert np.array_equal(postings.accumulate(size, terms[:1]), np.bincount(
        terms[0][0], weights=terms[0][1], minlength=size))
    assert not postings.accumulate(size, []).any()


def _plain_candidates(s: np.ndarray, n: int) -> np.ndarray:
    """The selection among every scored item, as `top_candidates` made it before sampling."""
    cand = np.flatnonzero(s > 0)
    if cand.size > n:
        kth = s[cand[np.argpartition(-s[cand], n - 1)[:n]]].min()
        cand = cand[s[cand] >= kth - postings.ROUNDING_SLACK]
    return cand


def test_sampled_selection_equals_selecting_among_every_item() -> None:
    """Large arrays: the sample only bounds the n-th best from below, so the candidates
    are the same, ties across the rounding slack and sparse or tiny scores included."""
    rng = np.random.default_rng(11)
    for size, share, n in ((5_000, 0.6, 10), (100_000, 0.5, 100), (100_000, 0.002, 100),
                           (50_000, 0.3, 1), (8_192, 1.0, 400), (10_000, 0.01, 10)):
        s = np.zeros(size)
        hit = rng.choice(size, size=int(size * share), replace=False)
        s[hit] = np.round(rng.random(hit.size) * 8, 2)  # many exact ties
        s[hit[:50]] += 4e-13  # ties only once rounded
        if size == 10_000:
            s[hit] = 1e-13  # below the slack: the plain selection answers
        for k in (n, 1, 37):
            assert np.array_equal(postings.top_candidates(s, k), _plain_candidates(s, k)), (size, k)


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_kept_hit_rows_follow_every_write(apps: dict[str, str],
                                                http: aiohttp.ClientSession, mode: str) -> None:
    """A repeated search takes its hits' rows from those kept at the version it scored at
    (versions.Rows; hybrid checks that version beside its vector statement and reads no
    rows at all); a write through another app that changes only metadata, or only the
    vector (updated_at), moves the version, so the next search shows the new row."""
    name = await make_corpus(http, apps["writer"])
    await _upsert(http, apps["writer"], name, [
        {"id": "m1", "vector": unit(8, 1), "text": "quartz lantern", "metadata": {"v": 1}},
        {"id": "m2", "vector": unit(8, 2), "text": "quartz harbor", "metadata": {"v": 1}}])
    req: dict[str, Any] = {"mode": mode, "query_text": "quartz", "k": 5}
    if mode == "hybrid":
        req["query_vector"] = unit(8, 1)

    async def hits() -> dict[str, dict[str, Any]]:
        status, body = await call(http, "POST", f"{apps['memory']}{C}/{name}/search", req)
        assert status == 200, body
        return {h["id"]: h for h in body["hits"]}

    for _ in range(3):  # parsed, then kept, then served from what is kept
        first = await hits()
    kept = (await _lexical_index(http, apps["memory"]))["rows_hits"]
    assert (await hits())["m1"]["metadata"] == {"v": 1}
    assert (await _lexical_index(http, apps["memory"]))["rows_hits"] > kept
    await _upsert(http, apps["writer"], name, [
        {"id": "m1", "vector": unit(8, 1), "text": "quartz lantern", "metadata": {"v": 2}}])
    assert (await hits())["m1"]["metadata"] == {"v": 2}
    assert (await hits())["m1"]["metadata"] == {"v": 2}
    await _upsert(http, apps["writer"], name, [
        {"id": "m2", "vector": unit(8, 5), "text": "quartz harbor", "metadata": {"v": 1}}])
    after = await hits()
    assert after["m2"]["updated_at"] != first["m2"]["updated_at"]
    assert after["m1"]["metadata"] == {"v": 2}
    status, _ = await call(http, "POST", f"{apps['writer']}{C}/{name}/items/delete",
                           {"ids": ["m1"]})
    assert status == 200
    assert list(await hits()) == ["m2"]


async def test_versions_asked_together_are_read_after_each_asked(pg_dsn: str) -> None:
    """versions.Versions: searches asking at once share statements, and each answer is
    read by a statement that started after it asked (a committed write is seen)."""
    import asyncio

    import psycopg
    from psycopg_pool import AsyncConnectionPool

    from internal.vectord.storage import schema

    await schema.migrate(pg_dsn)
    ids = [9_000_001, 9_000_002]
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("DELETE FROM vectord_lex_versions WHERE corpus_id = ANY(%s)", (ids,))
        async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=4, open=False) as pool:
            gate = versions.Versions()
            try:
                got = await asyncio.gather(*(gate.current(pool, ids) for _ in range(20)))
                assert all(g == {ids[0]: 0, ids[1]: 0} for g in got)
                assert gate.statements < 20
                for v in range(1, 6):
                    await conn.execute(
                        "INSERT INTO vectord_lex_versions (corpus_id, version) VALUES (%s, %s) "
                        "ON CONFLICT (corpus_id) DO UPDATE SET version = excluded.version",
                        (ids[0], v))
                    seen = await asyncio.gather(*(gate.current(pool, ids[:1]) for _ in range(5)))
                    assert seen == [{ids[0]: v}] * 5
            finally:
                await gate.close()
                await conn.execute("DELETE FROM vectord_lex_versions WHERE corpus_id = ANY(%s)",
                                   (ids,))


async def test_versions_hold_one_connection_while_batches_keep_coming(pg_dsn: str) -> None:
    """versions.Versions: a batch asked while the one before is in flight is read on the
    same connection, taken once; a batch whose connection cannot be taken fails alone
    (its searches see the error) and the next one takes a connection again."""
    import asyncio
    import contextlib

    import psycopg
    from psycopg_pool import AsyncConnectionPool

    from internal.vectord.storage import schema

    class Held:  # a connection whose statements wait for `go`
        def __init__(self, conn: Any, started: asyncio.Event, go: asyncio.Event) -> None:
            self.conn, self.started, self.go = conn, started, go

        async def execute(self, *args: Any) -> Any:
            self.started.set()
            await self.go.wait()
            return await self.conn.execute(*args)

    class Counted:
        def __init__(self, pool: AsyncConnectionPool) -> None:
            self.pool, self.taken, self.fail_next = pool, 0, False
            self.started, self.go = asyncio.Event(), asyncio.Event()

        @contextlib.asynccontextmanager
        async def connection(self) -> AsyncIterator[Any]:
            self.taken += 1
            if self.fail_next:
                self.fail_next = False
                raise psycopg.OperationalError("no connection (test)")
            async with self.pool.connection() as conn:
                yield Held(conn, self.started, self.go)

    await schema.migrate(pg_dsn)
    cid = 9_000_011
    async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False,
                                   kwargs={"autocommit": True}) as pool:
        reads = Counted(pool)
        gate = versions.Versions()
        try:
            first = asyncio.create_task(gate.current(reads, [cid]))
            await reads.started.wait()  # the first batch's statement is in flight
            second = asyncio.create_task(gate.current(reads, [cid]))
            await asyncio.sleep(0)
            reads.go.set()
            assert await first == await second == {cid: 0}
            assert (gate.statements, reads.taken) == (2, 1)
            reads.fail_next = True
            with pytest.raises(psycopg.OperationalError):
                await gate.current(reads, [cid])
            assert await gate.current(reads, [cid]) == {cid: 0}
            assert (gate.statements, reads.taken) == (3, 3)
        finally:
            await gate.close()


@pytest.mark.parametrize("rank", [3, None])
def test_lexical_hit_spelled_out_equals_hit(rank: int | None) -> None:
    """hits.from_lexical_row (the in-memory BM25's hits) is hits.hit spelled out."""
    from datetime import UTC, datetime

    from internal.api.vectord import Corpus
    from internal.vectord.search import hits

    corpus = Corpus(id=7, name="c", dim=8, metric="cosine", language="english", model=None,
                    keyword_index="scan", created_at=datetime(2026, 1, 1, tzinfo=UTC))
    for row in ({"id": "a", "text": "t", "title": None, "tags": None, "metadata": None,
                 "language": "english", "updated_at": datetime(2026, 1, 2, tzinfo=UTC)},
                {"id": "b", "text": "t", "title": "T", "tags": ["x"], "metadata": {"k": 1},
                 "language": "german", "updated_at": datetime(2026, 1, 2, tzinfo=UTC)}):
        want = hits.hit(corpus, row, score=1.5, scores={"lexical": 1.5},
                        ranks={} if rank is None else {"lexical": rank})
        assert hits.from_lexical_row(corpus, row, 1.5, rank) == want
