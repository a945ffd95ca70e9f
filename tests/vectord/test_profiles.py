"""What a corpus is about, through vectord: its description (created with, changed, listed,
refused when bad), its profile following its writes and deletes, and resource selection
in a multi-search (the corpus a question is about first where the union put another's
hit first; an explicit weight wins; `corpus_selection: false` is the union)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
M = "/v1/vectors/search"


def items(texts: list[str], prefix: str, seed: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "vector": unit(8, seed + i), "text": t}
            for i, t in enumerate(texts)]


async def upsert(http: aiohttp.ClientSession, base: str, name: str,
                 rows: list[dict[str, Any]]) -> None:
    status, out = await call(http, "POST", f"{base}{C}/{name}/items", {"items": rows})
    assert status == 200, out


async def current_profile(http: aiohttp.ClientSession, base: str, name: str,
                          documents: int) -> dict[str, Any]:
    """The corpus's profile once it reflects its last write (built in the background)."""
    deadline = time.monotonic() + 60
    while True:
        status, out = await call(http, "GET", f"{base}{C}/{name}/profile")
        assert status == 200, out
        if out["current"] and out["documents"] == documents:
            return dict(out)
        assert time.monotonic() < deadline, out
        await asyncio.sleep(0.3)


async def test_a_description_is_given_changed_listed_and_checked(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    name = await make_corpus(http, vectord_url, description="  Tickets of the help desk  ")
    status, out = await call(http, "GET", f"{vectord_url}{C}/{name}")
    assert status == 200 and out["description"] == "Tickets of the help desk"
    status, listed = await call(http, "GET", f"{vectord_url}{C}")
    assert [c["description"] for c in listed["corpora"] if c["name"] == name] == [
        "Tickets of the help desk"]
    status, out = await call(http, "PATCH", f"{vectord_url}{C}/{name}",
                             {"description": "HR policies"})
    assert status == 200 and out["description"] == "HR policies" and out["name"] == name
    status, out = await call(http, "PATCH", f"{vectord_url}{C}/{name}", {"description": ""})
    assert status == 200 and "description" not in out  # cleared
    for body, field in (({"description": "a\x00b"}, "description"),
                        ({"description": "x" * 2001}, "description"), ({}, "description"),
                        ({"description": "ok", "name": "other"}, "name")):
        status, out = await call(http, "PATCH", f"{vectord_url}{C}/{name}", body)
        assert status == 400 and out["error"]["field"] == field, (body, out)
    status, out = await call(http, "PATCH", f"{vectord_url}{C}/no_such_corpus_zz",
                             {"description": "x"})
    assert status == 404 and out["error"]["message"] == "corpus 'no_such_corpus_zz' not found"
    status, out = await call(http, "POST", f"{vectord_url}{C}",
                             {"name": "bad_description_zz", "dim": 8, "description": 7})
    assert status == 400 and out["error"]["field"] == "description"


async def test_a_profile_follows_its_corpus_writes_and_deletes(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    # Its distinctive words are told against the other corpora, shrunk toward the pooled
    # share: a background corpus five times its size, so the small corpora other tests
    # leave in the shared stack cannot make its words look common.
    background = await make_corpus(http, vectord_url)
    await upsert(http, vectord_url, background, items(
        [f"the harbour's weather report, entry {i}" for i in range(200)], "b", 900))
    name = await make_corpus(http, vectord_url)
    status, out = await call(http, "GET", f"{vectord_url}{C}/{name}/profile")
    assert status == 200 and out["corpus"] == name  # an empty corpus: nothing yet, or 0
    await upsert(http, vectord_url, name, items(
        [f"tapir tracks by the river, note {i}" for i in range(20)]
        + [f"dugong herds graze the seagrass, note {i}" for i in range(20)], "a"))
    await current_profile(http, vectord_url, background, 200)
    got = await current_profile(http, vectord_url, name, 40)
    words = {t["word"]: t for t in got["distinctive"]}
    assert {"tapir", "dugong"} <= set(words), got
    assert words["tapir"]["documents"] == 20 and words["tapir"]["share"] == 0.5
    assert got["lexemes"] >= 6 and got["sampled"] == 40 and got["version"] >= 1
    # The tapirs leave, kinkajous arrive: the profile follows.
    status, out = await call(http, "POST", f"{vectord_url}{C}/{name}/items/delete",
                             {"ids": [f"a{i}" for i in range(20)]})
    assert status == 200, out
    await upsert(http, vectord_url, name, items(
        [f"kinkajous in the canopy, note {i}" for i in range(10)], "p", 100))
    got = await current_profile(http, vectord_url, name, 30)
    words = {t["word"]: t for t in got["distinctive"]}
    assert "tapir" not in words and {"kinkajous", "dugong"} <= set(words), got
    assert words["dugong"]["share"] == round(20 / 30, 6)
    # A new description is taken at once, and the profile says it is not current until then.
    status, out = await call(http, "PATCH", f"{vectord_url}{C}/{name}",
                             {"description": "animals of the tropics"})
    assert status == 200
    got = await current_profile(http, vectord_url, name, 30)
    assert got["description"] == "animals of the tropics"


async def _platforms(http: aiohttp.ClientSession, base: str) -> tuple[str, str]:
    """A corpus about Windows (every page says so) and a general one whose page matches
    the question's other words better."""
    win = await make_corpus(http, base)
    await upsert(http, base, win, items(
        ["taskkill: kill a running process on Windows"]
        + [f"Windows tip {i}: the registry keeps settings" for i in range(29)], "w"))
    gen = await make_corpus(http, base)
    await upsert(http, base, gen, items(
        ["pkill: kill a process by its name"]
        + [f"gardening note {i}: water the roses" for i in range(59)], "g", 500))
    await current_profile(http, base, win, 30)
    await current_profile(http, base, gen, 60)
    return win, gen


async def test_the_corpus_a_question_is_about_ranks_first(
        vectord_url: str, http: aiohttp.ClientSession) -> None:
    win, gen = await _platforms(http, vectord_url)
    ask = {"mode": "lexical", "query_text": "kill a process by name on windows", "k": 3,
           "corpora": [gen, win]}
    status, union = await call(http, "POST", f"{vectord_url}{M}",
                               {**ask, "corpus_selection": False})
    assert status == 200 and union["hits"][0]["id"] == "g0", union
    assert all("selection" not in r for r in union["results"])
    status, out = await call(http, "POST", f"{vectord_url}{M}", ask)
    assert status == 200, out
    assert out["hits"][0]["id"] == "w0" and out["hits"][0]["corpus"] == win, out
    by = {r["corpus"]: r["selection"] for r in out["results"]}
    assert by[gen] == {"score": 0.0, "weight": 1.0, "evidence": []}
    (ev,) = by[win]["evidence"]
    assert (ev["word"], ev["source"], ev["share"], ev["others"]) == (
        "windows", "content", 1.0, 0.0)
    assert by[win]["weight"] > 1.0
    w0 = out["hits"][0]
    assert w0["merge_score"] == w0["score"] * by[win]["weight"]
    # The caller's weight wins over the selection's (the evidence is still told).
    status, out = await call(http, "POST", f"{vectord_url}{M}",
                             {**ask, "corpus_weights": {win: 1.0}})
    assert status == 200 and out["hits"][0]["id"] == "g0", out
    sel = {r["corpus"]: r["selection"] for r in out["results"]}[win]
    assert sel["weight"] == 1.0 and sel["evidence"]
    # Every mode but keyword's (newest first: no weight) weighs by it.
    for mode in ("vector", "hybrid"):
        status, out = await call(http, "POST", f"{vectord_url}{M}",
                                 {**ask, "mode": mode, "query_vector": unit(8, 3)})
        assert status == 200 and all("selection" in r for r in out["results"]), (mode, out)
    status, out = await call(http, "POST", f"{vectord_url}{M}", {**ask, "mode": "keyword"})
    assert status == 200 and all("selection" not in r for r in out["results"]), out
    # A question naming no corpus's subject: the union's ranking to the bit. (One naming
    # the other's, "water the roses", weighs that one: its pages all hold both words.)
    plain = {**ask, "query_text": "kill a running process"}
    _, a = await call(http, "POST", f"{vectord_url}{M}", plain)
    _, b = await call(http, "POST", f"{vectord_url}{M}", {**plain, "corpus_selection": False})
    assert a["hits"] == b["hits"] and all(r["selection"]["weight"] == 1.0 for r in a["results"])
    _, roses = await call(http, "POST", f"{vectord_url}{M}", {**ask, "query_text": "roses"})
    assert {r["corpus"]: r["selection"]["weight"] > 1 for r in roses["results"]} == {
        gen: True, win: False}
