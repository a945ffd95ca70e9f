"""Auto-language corpora score like fixed-language ones on one-language data.

Two differences from an English corpus were found on Cranfield and CISI: items too short
to detect were stored as `simple`, and the query was also stemmed in `simple` whatever the
corpus held, so unstemmed query words matched other words' stems ("environment" against
"environmental", whose English stem is "environment").
"""

from __future__ import annotations

import aiohttp

from internal.common import language
from tests.vectord.test_lexical import _doc, _search, _upsert
from tests.vectord.vdata import make_corpus

ENGLISH = [
    "Heat transfer in laminar boundary layers was measured on a flat plate in a wind tunnel.",
    "The pressure distribution over a slender cone at supersonic speeds is computed here.",
    "Experiments on the buckling of thin cylindrical shells under axial compression.",
    "A theory of the flutter of panels in supersonic flow is presented and compared.",
    "Skin friction measurements in turbulent flow along a smooth wall are reported.",
    "Shock waves in a shock tube were photographed to study the reflected wave.",
    "The stability of a laminar jet is discussed for small disturbances of the flow.",
    "Creep of metal columns at elevated temperatures is analysed by a simple model.",
    "Hypersonic flow past blunt bodies produces a detached shock and a hot layer.",
    "Wings of low aspect ratio were tested to find the lift at high angles of attack.",
    "Environmental testing of instruments in a space vehicle is described in detail.",
]


def test_dominant_language_rule() -> None:
    assert language.dominant({"english": 9}) is None  # too few detected items
    assert language.dominant({"english": 10, "simple": 50}) == "english"
    assert language.dominant({"english": 8, "german": 2}) == "english"  # 0.8 of them
    assert language.dominant({"english": 7, "german": 3}) is None  # mixed: no prior
    assert language.detects(None, "auto") and language.detects("auto", "english")
    assert not language.detects("de", "auto") and not language.detects(None, "english")


async def test_short_items_take_the_corpus_language(vectord_url: str,
                                                    http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, language="auto")
    await _upsert(http, vectord_url, name, [_doc(f"en{i}", i, t) for i, t in enumerate(ENGLISH)])
    # Too short to detect: a corpus that is all English gives them English, not `simple`.
    await _upsert(http, vectord_url, name, [_doc("empty", 50, ""), _doc("short", 51, "Wings"),
                                            _doc("told", 52, "Wings", language="simple")])
    hits = await _search(http, vectord_url, name, mode="lexical", query_text="wing", k=20)
    got = {h["id"]: h["language"] for h in hits}
    assert got["short"] == "english" and got["en9"] == "english"
    assert "told" not in got  # an explicit language is kept: `simple` has no stem "wing"
    # A mixed batch on a new corpus: the batch itself is the evidence.
    mixed = await make_corpus(http, vectord_url, language="auto")
    await _upsert(http, vectord_url, mixed, [_doc(f"en{i}", i, t) for i, t in enumerate(ENGLISH)]
                  + [_doc("short", 51, "Wings")])
    hits = await _search(http, vectord_url, mixed, mode="lexical", query_text="wing", k=20)
    assert {h["id"]: h["language"] for h in hits}["short"] == "english"


async def test_auto_query_is_stemmed_in_the_corpus_languages_only(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    docs = [_doc(f"en{i}", i, t) for i, t in enumerate(ENGLISH)]
    auto = await make_corpus(http, vectord_url, language="auto")
    english = await make_corpus(http, vectord_url, language="english")
    await _upsert(http, vectord_url, auto, docs)
    await _upsert(http, vectord_url, english, docs)
    for query in ("environment", "the wings of a vehicle", "it will be the flow"):
        for mode in ("lexical", "hybrid"):
            extra = {"query_vector": docs[0]["vector"]} if mode == "hybrid" else {}
            a = await _search(http, vectord_url, auto, mode=mode, query_text=query, k=10, **extra)
            e = await _search(http, vectord_url, english, mode=mode, query_text=query, k=10,
                              **extra)
            assert [(h["id"], round(h["score"], 9)) for h in a] == [
                (h["id"], round(h["score"], 9)) for h in e], (query, mode)
    # "environment" stems to "environ"; "Environmental" to "environment": no match either way.
    assert await _search(http, vectord_url, auto, mode="lexical", query_text="environment") == []
