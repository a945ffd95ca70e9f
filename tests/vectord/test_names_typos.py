"""Exact names first, typo tolerance and keyword mode's order, through vectord on a real
PostgreSQL: a question that is an item's title or id stem ranks it first, a one-edit typo
finds its page and the answer says `did you mean`, keyword mode ranks a whole-word id
match before substrings; a filtered search (a tenant's) corrects nothing."""

from __future__ import annotations

import aiohttp
import pytest

from tests.vectord.vdata import call, make_corpus, unit

C = "/v1/vectors/corpora"
DIM = 8
# Command pages as a wiki sync stores them (`<name>.md#0`, the title the name); the
# neighbours of `ss` say "ss" more often than its own page does.
PAGES = [
    ("ss", "Utility to investigate sockets."),
    ("sshare", "List the shares of associations: ss ss ss, like ss output."),
    ("sstat", "Show the status of running jobs, ss style."),
    ("useradd", "Create a new user account with a home directory."),
    ("userdel", "Remove a user account and its files."),
    ("usermod", "Modify a user account: its groups, shell and home."),
    ("journalctl", "Query the systemd journal: the logs of services."),
    ("at", "Execute commands once at a later time."),
    ("dmesg", "Write the kernel messages to standard output."),
    ("mesg", "Check or set a terminal's ability to receive messages."),
]


@pytest.fixture(scope="module")
async def pages(vectord_url: str) -> str:
    async with aiohttp.ClientSession() as http:
        name = await make_corpus(http, vectord_url, dim=DIM)
        for i, (title, text) in enumerate(PAGES):  # one call each: `ss` is the oldest
            status, body = await call(http, "POST", f"{vectord_url}{C}/{name}/items", {"items": [
                {"id": f"{title}.md#0", "vector": unit(DIM, 100 + i), "title": title,
                 "text": text, "metadata": {"parent_id": f"{title}.md"}}]})
            assert status == 200, body
    return name


async def _search(http: aiohttp.ClientSession, url: str, corpus: str, **body: object
                  ) -> dict[str, object]:
    status, out = await call(http, "POST", f"{url}{C}/{corpus}/search", {"k": 3, **body})
    assert status == 200, out
    return dict(out)


def _ids(out: dict[str, object]) -> list[str]:
    return [h["id"] for h in out["hits"]]  # type: ignore[attr-defined, index]


async def test_an_exact_title_beats_a_fuzzy_neighbour(vectord_url: str, pages: str,
                                                      http: aiohttp.ClientSession) -> None:
    # BM25 alone ranks `sshare` (four "ss" in its text) above `ss` (one, in its title).
    lexical = await _search(http, vectord_url, pages, mode="lexical", query_text="ss")
    assert _ids(lexical)[0] == "sshare.md#0"
    for seed in range(3):  # whatever the vector layer says
        out = await _search(http, vectord_url, pages, mode="hybrid", query_text="ss",
                            query_vector=unit(DIM, seed))
        assert _ids(out)[0] == "ss.md#0"
        # A question that contains a rare name ranks its page first too.
        out = await _search(http, vectord_url, pages, mode="hybrid",
                            query_text="journalctl logs of a service", query_vector=unit(DIM, seed))
        assert _ids(out)[0] == "journalctl.md#0"
        # A name of stop words has no lexeme: its id stem names it.
        out = await _search(http, vectord_url, pages, mode="hybrid", query_text="at",
                            query_vector=unit(DIM, 100 + 7))
        assert _ids(out)[0] == "at.md#0"


async def test_a_one_edit_typo_finds_its_page_and_says_did_you_mean(
        vectord_url: str, pages: str, http: aiohttp.ClientSession) -> None:
    for mode in ("lexical", "hybrid"):
        out = await _search(http, vectord_url, pages, mode=mode, query_text="usradd",
                            query_vector=unit(DIM, 1))
        assert _ids(out)[0] == "useradd.md#0", (mode, out)
        assert out["did_you_mean"] == "useradd"
        out = await _search(http, vectord_url, pages, mode=mode, query_text="journalclt logs",
                            query_vector=unit(DIM, 1))
        assert _ids(out)[0] == "journalctl.md#0"
        assert out["did_you_mean"] == "journalctl logs"
    # A question whose words the corpus holds is not corrected.
    out = await _search(http, vectord_url, pages, mode="lexical", query_text="useradd")
    assert "did_you_mean" not in out
    # Nor one too short to tell a typo from another name.
    out = await _search(http, vectord_url, pages, mode="lexical", query_text="sz")
    assert "did_you_mean" not in out and _ids(out) == []
    # The multi-corpus route says it too.
    status, multi = await call(http, "POST", f"{vectord_url}/v1/vectors/search",
                               {"corpora": [pages], "mode": "lexical", "query_text": "usradd",
                                "k": 3})
    assert status == 200 and multi["did_you_mean"] == "useradd", multi


async def test_a_filtered_search_corrects_nothing(vectord_url: str, pages: str,
                                                 http: aiohttp.ClientSession) -> None:
    # A filter (a tenant token's is one) admits some rows only; the corpus's vocabulary
    # holds the others' words too, so no correction (nor suggestion) is made from it.
    out = await _search(http, vectord_url, pages, mode="lexical", query_text="usradd",
                        filter={"parent_id": "userdel.md"})
    assert "did_you_mean" not in out and _ids(out) == []


async def test_keyword_ranks_a_whole_word_id_match_before_substrings(
        vectord_url: str, pages: str, http: aiohttp.ClientSession) -> None:
    out = await _search(http, vectord_url, pages, mode="keyword", query_text="ss", k=5)
    # The id and title `ss` first (the oldest: it was last when newest came first), then
    # "ss" as a word of a text, then inside words (`mesg`'s "messages"), newest first.
    assert _ids(out) == ["ss.md#0", "sstat.md#0", "sshare.md#0", "mesg.md#0", "dmesg.md#0"]
    assert [h["scores"]["keyword"] for h in out["hits"]] == [3.0, 1.0, 1.0, 0.0, 0.0]
    out = await _search(http, vectord_url, pages, mode="keyword", query_text="user", k=5)
    # "user" is a whole word in the texts of useradd, userdel and usermod (newest
    # first), and a part of no title or id: no exact class.
    assert _ids(out) == ["usermod.md#0", "userdel.md#0", "useradd.md#0"]
