"""Shaped results through vectord's real routes and PostgreSQL: highlights, group_by,
facets, diversity, recency; and no option -> the very same answer as before."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.config import Config
from internal.vectord.shaping import facet_counts, highlight
from tests.helpers import serve, url_of, with_section
from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"


async def _corpus(http: aiohttp.ClientSession, base: str, items: list[dict[str, Any]],
                  **extra: Any) -> str:
    name = await make_corpus(http, base, dim=8, **extra)
    status, body = await call(http, "POST", f"{base}{C}/{name}/items", {"items": items})
    assert status == 200, body
    return name


async def _search(http: aiohttp.ClientSession, base: str, name: str, **body: Any
                  ) -> dict[str, Any]:
    status, out = await call(http, "POST", f"{base}{M}", {"corpora": [name], **body})
    assert status == 200, out
    return out


def _it(i: int, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"d{i:03d}", "vector": unit(8, i), "text": text, **extra}


async def test_highlight_marks_stemmed_words_per_language_and_escapes_markup(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await _corpus(http, vectord_url, [
        _it(1, "She was running <img src=x onerror=alert(1)> past the old mill.",
            title="Running <b>late</b>", language="english"),
        _it(2, "Das Haus am See hat neue Fenster.", title="Ein Haus", language="german"),
        _it(3, "Nothing to see here at all, only words.", language="english"),
    ], language="auto")
    out = await _search(http, vectord_url, name, mode="lexical", query_text="runs Häuser",
                        k=5, highlight=True)
    by_id = {h["id"]: h for h in out["hits"]}
    en, de = by_id["d001"], by_id["d002"]
    assert en["highlight_kind"] == {"title": "lexical", "text": "lexical"}
    assert en["highlight"]["title"] == ["<mark>Running</mark> &lt;b&gt;late&lt;/b&gt;"]
    [frag] = en["highlight"]["text"]
    assert "<mark>running</mark>" in frag
    assert "&lt;img src=x onerror=alert(1)&gt;" in frag and "<img" not in frag
    assert de["highlight"]["text"] == ["Das <mark>Haus</mark> am See hat neue Fenster."]
    # A hit without the query's words (found by its vector): its lead, unmarked.
    out = await _search(http, vectord_url, name, mode="hybrid", query_text="runs",
                        query_vector=unit(8, 3), k=3,
                        highlight={"pre": "[", "post": "]", "fields": ["text"]})
    lead = next(h for h in out["hits"] if h["id"] == "d003")
    assert lead["highlight"] == {"text": ["Nothing to see here at all, only words."]}
    assert lead["highlight_kind"] == {"text": "lead"}
    ran = next(h for h in out["hits"] if h["id"] == "d001")
    assert "[running]" in ran["highlight"]["text"][0]
    # A stored sentinel character cannot open a mark.
    status, _ = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
        _it(4, "running \x02<script>x</script>\x03 away", language="english")]})
    assert status == 200
    out = await _search(http, vectord_url, name, mode="lexical", query_text="runs", k=5,
                        highlight={"fields": ["text"]})
    frag = next(h for h in out["hits"] if h["id"] == "d004")["highlight"]["text"][0]
    assert frag.count("<mark>") == 1 and "&lt;script&gt;" in frag and "\x02" not in frag


TRICKY = [  # words PostgreSQL's parser reads otherwise than as plain words, next to plain ones
    ("english", "Running runs ran: the runner's run. See http://x.org/run/runs.html or run@x.org"),
    ("english", "IL-2 and anti-IL-2 receptor; 2.5-fold, 2 of 3,000 cells; HIV/AIDS and HIV-1 in 2"),
    ("english", "A well-known <b>cell</b> &amp; cells_in vitro; the cell.Cells, e.g. cell-cycle"),
    ("english", "Emergency emergencies added adding; being beings; skies sky dying die"),
    ("german", "Die Häuser am See; das Haus, des Hauses; Häuser-Reihe und 2-Häuser"),
    ("simple", "Runs RUN running 42 x42"),
]


@pytest.fixture(scope="module")
async def sql_engine(base_cfg: Config) -> AsyncIterator[str]:
    """A vectord scoring BM25 in PostgreSQL: every highlight is ts_headline's there."""
    from internal.vectord.server import make_app

    server = await serve(make_app(with_section(base_cfg, "vectord", lexical_engine="sql")))
    yield url_of(server)
    await server.close()


async def test_highlights_from_the_index_equal_postgresqls(
        vectord_url: str, sql_engine: str, http: aiohttp.ClientSession) -> None:
    name = await _corpus(http, vectord_url, [
        _it(i, text, title=text[:24], language=lang) for i, (lang, text) in enumerate(TRICKY)],
        language="auto")
    taken = dict.fromkeys(highlight.MARKED, 0)
    for query in ("runs", "cell HIV 2", "IL-2 fold", "emergency add being sky die",
                  "Häuser", "run 42", "x.org", "well-known cells"):
        q = {"mode": "lexical", "query_text": query, "k": 10,
             "highlight": {"pre": "[", "post": "]", "fragment_chars": 40, "fragments": 3}}
        before = dict(highlight.MARKED)
        memory = await _search(http, vectord_url, name, **q)
        for way, n in highlight.MARKED.items():
            taken[way] += n - before[way]
        sql = await _search(http, sql_engine, name, **q)
        assert memory["hits"], query
        assert ([(h["id"], h["highlight"], h["highlight_kind"]) for h in memory["hits"]]
                == [(h["id"], h["highlight"], h["highlight_kind"]) for h in sql["hits"]]), query
    # Both ways were taken: marks proven from the index, and PostgreSQL's where they were not.
    assert taken["python"] > 0 and taken["postgres"] > 0, taken


async def test_group_by_parent_returns_one_hit_per_page(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    pages = {"a.md": 4, "b.md": 3, "c.md": 1, "d.md": 2}
    items, i = [], 0
    for page, chunks in pages.items():
        for c in range(chunks):
            items.append(_it(i, f"chunk {c} of page {page} about printers",
                             metadata={"parent_id": page}))
            i += 1
    name = await _corpus(http, vectord_url, items)
    plain = await _search(http, vectord_url, name, mode="hybrid", query_text="printers page",
                          query_vector=unit(8, 0), k=4)
    assert len({h["metadata"]["parent_id"] for h in plain["hits"]}) < 4
    out = await _search(http, vectord_url, name, mode="hybrid", query_text="printers page",
                        query_vector=unit(8, 0), k=4, group_by="parent", group_size=2)
    parents = [h["metadata"]["parent_id"] for h in out["hits"]]
    assert sorted(parents) == sorted(pages)
    for h in out["hits"]:
        g = h["group"]
        assert g["key"] == h["metadata"]["parent_id"] and g["count"] == pages[g["key"]]
        assert len(g["hits"]) == min(1, pages[g["key"]] - 1)
        assert all(m["metadata"]["parent_id"] == g["key"] for m in g["hits"])
    assert out["results"][0]["hits"] == 4
    status, bad = await call(http, "POST", f"{vectord_url}{M}", {
        "corpora": [name], "mode": "vector", "query_vector": unit(8, 0), "group_by": "page"})
    assert status == 400 and bad["error"]["field"] == "group_by"


async def test_facet_counts_equal_filtered_lexical_searches(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    words = ["printer toner", "printer jam", "vpn drop", "printer vpn", "toner order"]
    items = [_it(i, words[i % 5], tags=[f"t{i % 3}", "all"][: 1 + i % 2],
                 metadata={"type": ["ticket", "page"][i % 2],
                           "date": f"2026-0{1 + i % 4}-1{i % 9}"})
             for i in range(30)]
    a = await _corpus(http, vectord_url, items[:17])
    b = await _corpus(http, vectord_url, items[17:])
    status, out = await call(http, "POST", f"{vectord_url}{M}", {
        "corpora": [a, b], "mode": "hybrid", "query_text": "printer", "query_vector": unit(8, 1),
        "k": 3, "facets": ["corpus", "tags", "type", {"field": "metadata.date",
                                                     "interval": "month"}]})
    assert status == 200, out
    facets = out["facets"]
    assert list(facets) == ["corpus", "tags", "type", "metadata.date"]
    assert list(facets["metadata.date"]) == sorted(facets["metadata.date"])

    async def count(flt: dict[str, Any], corpora: list[str]) -> int:
        status, got = await call(http, "POST", f"{vectord_url}{M}", {
            "corpora": corpora, "mode": "lexical", "query_text": "printer", "k": 1000,
            **({"filter": flt} if flt else {})})
        assert status == 200, got
        return len(got["hits"])

    total = await count({}, [a, b])
    assert total == 18  # 3 in 5 texts say printer
    assert facets["corpus"] == {a: await count({}, [a]), b: await count({}, [b])}
    for tag, n in facets["tags"].items():
        assert n == await count({"tags_any": [tag]}, [a, b]), tag
    for kind, n in facets["type"].items():
        assert n == await count({"type": kind}, [a, b]), kind
    for month, n in facets["metadata.date"].items():
        after, before = f"{month}-01", f"{month}-28T23:59:59"
        assert n == await count({"date": {"field": "date", "after": after + "T00:00:00Z",
                                          "before": before + "Z"}}, [a, b]), month
    assert sum(facets["type"].values()) == total
    # With a filter: over the items that pass it, always counted by PostgreSQL (so is a
    # scoped key's or tenant token's forced filter, ANDed into the request's filter).
    memory = facet_counts.COUNTED["memory"]
    status, out = await call(http, "POST", f"{vectord_url}{M}", {
        "corpora": [a, b], "mode": "lexical", "query_text": "printer", "k": 1,
        "filter": {"type": "ticket"}, "facets": ["tags"], "facet_size": 1})
    assert status == 200, out
    [(tag, n)] = out["facets"]["tags"].items()
    assert facet_counts.COUNTED["memory"] == memory
    assert n == await count({"type": "ticket", "tags_any": [tag]}, [a, b])


async def test_facets_from_the_index_equal_the_statements_also_after_a_write(
        vectord_url: str, sql_engine: str, http: aiohttp.ClientSession) -> None:
    words = ["printer toner", "printer jam", "vpn drop", "printer vpn", "toner order"]
    meta: list[Any] = ["ticket", ["page", "faq"], 3, None, "page"]
    items = [_it(i, words[i % 5], tags=[f"t{i % 3}", "all", "all"][: 1 + i % 3],
                 metadata={"date": f"2026-0{1 + i % 4}-1{i % 9}",
                           **({"type": meta[i % 5]} if i % 7 else {})})
             for i in range(40)]
    name = await _corpus(http, vectord_url, items)
    q = {"mode": "lexical", "query_text": "printer toner", "k": 3, "facets": [
        "corpus", "tags", "type", {"field": "metadata.date", "interval": "month"},
        {"field": "updated_at", "interval": "month"}]}

    async def both() -> dict[str, Any]:
        before = facet_counts.COUNTED["memory"]
        for _ in range(100):  # until the index holds the corpus whole (loaded in the background)
            memory = await _search(http, vectord_url, name, **q)
            if facet_counts.COUNTED["memory"] > before:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the facets were never counted from the index")
        sql = await _search(http, sql_engine, name, **q)
        assert memory["facets"] == sql["facets"]
        facets: dict[str, Any] = memory["facets"]
        return facets

    first = await both()
    types: dict[str, int] = {}
    for it in items:
        kind = it["metadata"].get("type")
        if "vpn drop" not in it["text"] and kind is not None:  # a match, of a type
            for v in kind if isinstance(kind, list) else [kind]:
                types[str(v)] = types.get(str(v), 0) + 1
    assert first["type"] == types and first["tags"]["all"] > 0
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
        _it(0, "printer toner", tags=["new"], metadata={"type": "memo"}),
        _it(99, "printer", tags=["new"])]})
    assert status == 200, body
    after = await both()  # the values read again at the corpus's new version
    assert after["tags"]["new"] == 2 and after["type"]["memo"] == 1
    assert after["corpus"][name] == first["corpus"][name] + 1


async def test_diversity_pushes_copies_down(vectord_url: str,
                                            http: aiohttp.ClientSession) -> None:
    texts = ["the printer jams on floor two", "the printer needs new toner",
             "the printer driver for mac", "printer queue is stuck"]
    items = []
    for t, text in enumerate(texts):
        v = unit(8, 100 + t)
        for copy in range(3):
            items.append({"id": f"x{t}-{copy}", "vector": v, "text": text})
    name = await _corpus(http, vectord_url, items)
    q = {"mode": "hybrid", "query_text": "printer jams", "query_vector": unit(8, 100), "k": 4}
    plain = await _search(http, vectord_url, name, **q)
    assert len({h["text"] for h in plain["hits"]}) < 3
    out = await _search(http, vectord_url, name, **q, diversity=0.7)
    assert len({h["text"] for h in out["hits"]}) >= 3
    assert out["hits"][0]["text"] == plain["hits"][0]["text"]
    none = await _search(http, vectord_url, name, **q, diversity=0)
    assert [h["id"] for h in none["hits"]] == [h["id"] for h in plain["hits"]]


async def test_recency_reorders_equal_items_by_date(vectord_url: str,
                                                    http: aiohttp.ClientSession) -> None:
    v = unit(8, 7)
    name = await _corpus(http, vectord_url, [
        {"id": "a-old", "vector": v, "text": "quarterly report", "metadata": {"date": "2020-01-01"}},
        {"id": "b-new", "vector": v, "text": "quarterly report", "metadata": {"date": "2026-11-01"}},
    ])
    for mode in ("hybrid", "vector", "lexical"):
        q = {"mode": mode, "query_text": "quarterly report", "k": 2}
        if mode != "lexical":
            q["query_vector"] = unit(8, 8)  # not v itself: a distance of 0 divides to 0
        plain = await _search(http, vectord_url, name, **q)
        assert [h["id"] for h in plain["hits"]] == ["a-old", "b-new"]
        out = await _search(http, vectord_url, name, **q, recency={
            "field": "metadata.date", "half_life_days": 365, "weight": 0.5})
        assert [h["id"] for h in out["hits"]] == ["b-new", "a-old"], mode
        new, old = out["hits"]
        assert 0.5 <= old["recency_factor"] < new["recency_factor"] <= 1.0
        assert new["scores"] == old["scores"]  # per-layer scores unchanged


async def test_no_option_answers_as_before(vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await _corpus(http, vectord_url, [_it(i, f"printer note {i}") for i in range(20)])
    q = {"mode": "hybrid", "query_text": "printer note", "query_vector": unit(8, 2), "k": 5}
    plain = await _search(http, vectord_url, name, **q)
    off = await _search(http, vectord_url, name, **q, highlight=False, diversity=None,
                        facets=None, group_by=None, recency=None)
    for out in (plain, off):
        out.pop("took_ms")
        for r in out["results"]:
            r.pop("took_ms")
    assert plain == off
    assert set(plain) == {"mode", "hits", "results", "include_missing"}
    assert all("highlight" not in h and "group" not in h and "recency_factor" not in h
               for h in plain["hits"])


async def test_facets_count_a_word_written_after_the_question_was_asked(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    """A filtered search's facets are counted over the corpus as it is now: a word no item
    held when the same question was asked before, written since, is counted (the cached
    parse of the question must not answer "nothing matches")."""
    name = await _corpus(http, vectord_url, [
        _it(i, "green tea brewing", metadata={"tenant": "a"}) for i in range(3)])
    q = {"mode": "lexical", "query_text": "espresso pressure", "k": 3,
         "filter": {"metadata": {"tenant": "a"}}, "facets": ["metadata.tenant", "corpus"]}
    out = await _search(http, vectord_url, name, **q)
    assert out["hits"] == [] and out["facets"]["metadata.tenant"] == {}
    status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
        _it(7, "espresso at nine bars of pressure", metadata={"tenant": "a"})]})
    assert status == 200, body
    out = await _search(http, vectord_url, name, **q)
    assert [h["id"] for h in out["hits"]] == ["d007"]
    assert out["facets"] == {"metadata.tenant": {"a": 1}, "corpus": {name: 1}}
