"""Shaped results through matrixd (real vectord, real embedd): the options reach vectord,
facets come back summed over the corpora, a bad option is the caller's 400."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.semantic import PASSAGE_BUDGET, passages
from tests.embedd.test_lanes import lanes
from tests.helpers import url_of
from tests.matrixd.test_server import post, start_matrix, unique

TEXTS = {
    "help": ["The printer on floor 2 jams after the toner swap.",
             "Printers need a new toner cartridge every quarter.",
             "The VPN drops when the laptop sleeps."],
    "wiki": ["Printing from a laptop: add the office printer.",
             "Guest Wi-Fi password rotates every Monday."],
}


@pytest.fixture(scope="module")
async def corpora(vectord_url: str, embedd_url: str) -> AsyncIterator[dict[str, str]]:
    names = {k: unique(k) for k in TEXTS}
    async with aiohttp.ClientSession() as s:
        vec = VectordClient(s, vectord_url)
        emb = EmbedClient(s, embedd_url)
        for key, texts in TEXTS.items():
            e = await emb.embed(texts)
            await vec.create_corpus(names[key], e.dim, model=e.model)
            await vec.upsert(names[key], [
                {"id": f"d{i}", "vector": v, "text": t, "tags": [key],
                 "metadata": {"parent_id": f"p{i % 2}"}}
                for i, (t, v) in enumerate(zip(texts, e.vectors, strict=True))], model=e.model)
        yield names
        for name in names.values():
            await vec.delete_corpus(name)


async def test_matrix_search_shapes_results(base_cfg: Config, vectord_url: str,
                                            embedd_url: str, corpora: dict[str, str],
                                            http: aiohttp.ClientSession) -> None:
    server = await start_matrix(base_cfg, vectord_url, embedd_url)
    url = f"{url_of(server)}/v1/matrix/search"
    try:
        names = list(corpora.values())
        q = {"query_text": "printer toner", "corpora": names, "k": 5}
        status, plain = await post(http, url, q)
        assert status == 200, plain
        assert "facets" not in plain and all("highlight" not in h for h in plain["hits"])
        status, out = await post(http, url, {**q, "highlight": True, "facets": ["corpus", "tags"],
                                             "group_by": "parent", "diversity": 0.3})
        assert status == 200, out
        assert out["facets"]["corpus"] == {corpora["help"]: 2, corpora["wiki"]: 1}
        assert out["facets"]["tags"] == {"help": 2, "wiki": 1}
        groups = [(h["corpus"], h["metadata"]["parent_id"]) for h in out["hits"]]
        assert len(groups) == len(set(groups)) == 4
        top = out["hits"][0]
        assert top["highlight_kind"]["text"] == "lexical" and "<mark>" in top["highlight"]["text"][0]
        assert [h["rank"] for h in out["hits"]] == [1, 2, 3, 4]
        for bad, field in (({"group_by": "page"}, "group_by"), ({"facets": ["title"]}, "facets[0]"),
                           ({"diversity": 2}, "diversity")):
            status, err = await post(http, url, {**q, **bad})
            assert status == 400 and err["error"]["field"] == field, err
    finally:
        await server.close()


async def test_a_vector_only_hit_gets_its_most_similar_passage(
        base_cfg: Config, vectord_url: str, embedd_url: str,
        http: aiohttp.ClientSession) -> None:
    name = unique("facility")
    text = ("The cafeteria opens at eight in the morning. Parking permits are renewed each "
            "January at the front desk. The elevator on the east side is under repair until "
            "May. Visitors sign in at reception.")
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        e = await emb.embed([text])
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [{"id": "f1", "vector": e.vectors[0], "text": text},
                                {"id": "f2", "vector": e.vectors[0], "text": "Opening hours.",
                                 "title": "Lift notes"}], model=e.model)
    server = await start_matrix(base_cfg, vectord_url, embedd_url)
    try:
        before = await lanes(http, embedd_url)
        status, out = await post(http, f"{url_of(server)}/v1/matrix/search", {
            "query_text": "when will the lift be fixed", "corpora": [name], "k": 2,
            "highlight": {"fragment_chars": 60}})
        assert status == 200, out
        # The passages are the search's own work: the interactive lane embeds them (the
        # question and 4 passages), never behind a bulk load's documents.
        after = await lanes(http, embedd_url)
        assert after["interactive"]["texts"] - before["interactive"]["texts"] >= 4
        assert after["bulk"]["texts"] == before["bulk"]["texts"]
        hit = next(h for h in out["hits"] if h["id"] == "f1")
        assert hit["highlight_kind"]["text"] == "semantic"
        assert hit["highlight"]["text"] == [
            "The elevator on the east side is under repair until May."]
        # A hit whose title holds the question's words was found by them: its text's lead.
        titled = next(h for h in out["hits"] if h["id"] == "f2")
        assert titled["highlight_kind"] == {"title": "lexical", "text": "lead"}
    finally:
        await server.close()
        async with aiohttp.ClientSession() as s:
            await VectordClient(s, vectord_url).delete_corpus(name)


async def test_semantic_passages_are_bounded_a_search(
        base_cfg: Config, vectord_url: str, embedd_url: str,
        http: aiohttp.ClientSession) -> None:
    """The vector-only hits in rank order take passages while the search's budget lasts
    (PASSAGE_BUDGET); a later one keeps its lead; a text of one passage needs no model
    call. None of these texts holds the question's words."""
    name = unique("budget")
    long_a = ("The cafeteria opens at eight. Parking permits renew in January. Guests "
              "sign in at the front desk. The east stairs are closed for painting. Badges are "
              "printed on the second floor.")
    long_b = ("The gym opens at six. Showers are on level one. Towels are handed out at "
              "the desk. Lockers are cleared every Friday. Classes are booked online.")
    short = "Elevator repairs end in May."
    texts = {"a": long_a, "b": long_b, "s": short}
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        e = await emb.embed(list(texts.values()))
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [{"id": i, "vector": v, "text": t} for (i, t), v
                                in zip(texts.items(), e.vectors, strict=True)], model=e.model)
    server = await start_matrix(base_cfg, vectord_url, embedd_url)
    try:
        cut = {i: len(passages(t, 40)) for i, t in texts.items()}
        assert cut["s"] == 1 and PASSAGE_BUDGET // 2 < cut["a"] <= PASSAGE_BUDGET
        assert PASSAGE_BUDGET // 2 < cut["b"] <= PASSAGE_BUDGET
        before = await lanes(http, embedd_url)
        status, out = await post(http, f"{url_of(server)}/v1/matrix/search", {
            "query_text": f"when will the lift be fixed {unique('q')}", "corpora": [name],
            "k": 3, "mode": "vector", "highlight": {"fragment_chars": 40}})
        assert status == 200, out
        after = await lanes(http, embedd_url)
        kinds = {h["id"]: h["highlight_kind"]["text"] for h in out["hits"]}
        first, second = (i for i in (h["id"] for h in out["hits"]) if i != "s")
        assert kinds == {"s": "semantic", first: "semantic", second: "lead"}, out["hits"]
        # The question and the first long text's passages; none for the short text.
        assert after["interactive"]["texts"] - before["interactive"]["texts"] == 1 + cut[first]
    finally:
        await server.close()
        async with aiohttp.ClientSession() as s:
            await VectordClient(s, vectord_url).delete_corpus(name)
