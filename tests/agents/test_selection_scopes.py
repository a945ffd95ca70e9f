"""What a corpus is about, held to the caller's scope on the shared stack (conftest.py):
a key never sees the description or the profile of a corpus outside it (listings, the
profile route, MCP's list_corpora, a search's `explain`, the console), and the selection
itself never weighs by one (a tenant token's searches are not weighed at all). The
admin's fan-out over both corpora weighs the one a question names."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

import lakehouse
from tests.agents.conftest import Live, call
from tests.agents.test_console import browser, wait  # noqa: F401 (browser: a fixture)
from tests.agents.test_console_keys import _use
from tests.agents.test_keys import _key, mcp_session

SEEN, HIDDEN = "sel_seen", "sel_hidden"
SECRET = "quokkanomics"  # only in the hidden corpus's description and pages
DOCS = {
    SEEN: ("Tea brewing guides", [
        "Green tea is brewed at 80 degrees for two minutes.",
        "Oolong tea takes hotter water and several short infusions.",
        "Black tea wants boiling water and four minutes."]),
    HIDDEN: (f"Notes of the {SECRET} desk on espresso machines", [
        f"The {SECRET} desk logs error E42 when the espresso water tank is empty.",
        f"The {SECRET} desk descales the espresso machine every month.",
        f"Espresso grind settings of the {SECRET} desk."]),
}


def _profiled(live: Live, name: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        status, out = call(f"{live.url}/v1/vectors/corpora/{name}/profile", None, live.auth)
        assert status == 200, out
        if out["current"] and out["documents"]:
            return
        assert time.monotonic() < deadline, out
        time.sleep(0.5)


@pytest.fixture(scope="module")
def seen_key(live: Live) -> Iterator[str]:
    """Two described corpora (one holding SECRET), and a key that sees only the other."""
    for name, (description, texts) in DOCS.items():
        status, emb = call(f"{live.url}/v1/embed", {"texts": texts}, live.auth)
        assert status == 200, emb
        status, out = call(f"{live.url}/v1/vectors/corpora",
                           {"name": name, "dim": emb["dim"], "model": emb["model"],
                            "description": description}, live.auth)
        assert status in (201, 409), out
        status, out = call(f"{live.url}/v1/vectors/corpora/{name}/items", {
            "model": emb["model"], "items": [{"id": f"{name}_{i}", "vector": v, "text": t}
                                             for i, (t, v) in enumerate(zip(
                                                 texts, emb["vectors"], strict=True))]},
            live.auth)
        assert status == 200, out
        _profiled(live, name)
    yield str(_key(live, "selection seen", ["search", "read"], [SEEN])["key"])


def _leaks(text: str) -> bool:
    return SECRET in text or HIDDEN in text


def test_a_key_sees_no_description_or_profile_outside_it(live: Live, seen_key: str) -> None:
    auth = {"Authorization": f"Bearer {seen_key}"}
    status, out = call(f"{live.url}/v1/vectors/corpora", None, auth)
    assert status == 200 and [(c["name"], c["description"]) for c in out["corpora"]] == [
        (SEEN, "Tea brewing guides")]
    # Answered as a corpus that does not exist.
    status, hidden = call(f"{live.url}/v1/vectors/corpora/{HIDDEN}/profile", None, auth)
    _, missing = call(f"{live.url}/v1/vectors/corpora/nope_zz/profile", None, live.auth)
    assert status == 404 and hidden == {**missing, "error": {
        **missing["error"], "message": missing["error"]["message"].replace("nope_zz", HIDDEN)},
        "request_id": hidden.get("request_id")}
    status, own = call(f"{live.url}/v1/vectors/corpora/{SEEN}/profile", None, auth)
    assert status == 200 and own["distinctive"] and not _leaks(json.dumps(own))
    # Against no other corpus it may see: its own most common words, no `others`.
    assert all("others" not in t for t in own["distinctive"])
    status, out = call(f"{live.url}/v1/vectors/corpora/{HIDDEN}", {"description": "x"}, auth,
                       method="PATCH")
    assert status == 404 and out["error"]["message"] == f"corpus {HIDDEN!r} not found"


def test_a_keys_search_is_weighed_among_its_own_corpora(live: Live, seen_key: str) -> None:
    auth = {"Authorization": f"Bearer {seen_key}"}
    for body in ({"query_text": f"{SECRET} espresso tea", "explain": True, "k": 20},
                 {"query_text": "espresso machine error", "explain": True}):
        status, out = call(f"{live.url}/v1/matrix/search", body, auth)
        assert status == 200, out
        assert [c["corpus"] for c in out["corpora"]] == [SEEN] and not _leaks(json.dumps(out))
        assert all("weight" not in c and "selection" not in c for c in out["corpora"])
    # The admin's fan-out over both weighs the one the question names.
    status, out = call(f"{live.url}/v1/matrix/search", {
        "query_text": f"what does the {SECRET} desk do", "corpora": [SEEN, HIDDEN],
        "explain": True}, live.auth)
    assert status == 200, out
    rows = {c["corpus"]: c for c in out["corpora"]}
    assert rows[HIDDEN]["weight"] > 1 and "weight" not in rows[SEEN], rows
    assert {e["source"] for e in rows[HIDDEN]["selection"]["evidence"]} >= {"description"}


def test_a_tenant_token_is_never_weighed_and_reads_no_profile(live: Live) -> None:
    key = _key(live, "selection tenant", ["search", "read"], [SEEN, HIDDEN])["key"]
    token = lakehouse.tenant_token(key, filter={"metadata": {"tenant": "a"}}, expires_in=600)
    auth = {"Authorization": f"Bearer {token}"}
    status, out = call(f"{live.url}/v1/matrix/search", {
        "query_text": f"{SECRET} desk", "corpora": [SEEN, HIDDEN], "explain": True}, auth)
    assert status == 200, out
    assert all("weight" not in c and "selection" not in c for c in out["corpora"]), out
    status, out = call(f"{live.url}/v1/vectors/corpora/{SEEN}/profile", None, auth)
    assert status == 403 and "tenant token" in out["error"]["message"], out


async def test_mcp_lists_the_descriptions_of_its_key_corpora_only(live: Live,
                                                                   seen_key: str) -> None:
    async with mcp_session(live, f"Bearer {seen_key}") as session:
        listed = await session.call_tool("list_corpora", {})
        assert not listed.is_error
        text = json.dumps(listed.structured_content) + " ".join(
            getattr(c, "text", "") for c in listed.content)
        assert "Tea brewing guides" in text and not _leaks(text)
        found = await session.call_tool("search", {"query": f"{SECRET} espresso tea"})
        assert not found.is_error
        assert not _leaks(json.dumps(found.structured_content))
    async with mcp_session(live, f"Bearer {live.token}") as session:
        listed = await session.call_tool("list_corpora", {})
        text = " ".join(getattr(c, "text", "") for c in listed.content)
        assert f"{HIDDEN}: 3 items" in text and f"Notes of the {SECRET} desk" in text


def test_the_console_shows_and_changes_descriptions_in_scope(
        live: Live, seen_key: str, browser: WebDriver) -> None:  # noqa: F811
    _use(browser, live, seen_key, "#/corpora")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#corpora-table tbody tr"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#corpora-table tbody tr")
    assert [r.get_attribute("data-corpus") for r in rows] == [SEEN]
    assert "Tea brewing guides" in rows[0].text and not _leaks(browser.page_source)
    _use(browser, live, live.token, "#/corpora")
    row = wait(browser).until(lambda d: d.find_element(
        By.CSS_SELECTOR, f'#corpora-table tr[data-corpus="{SEEN}"]'))
    row.find_element(By.CSS_SELECTOR, "button.describe").click()
    field = row.find_element(By.CSS_SELECTOR, "td.about input")
    field.clear()
    field.send_keys("Guides to brewing tea")
    row.find_element(By.CSS_SELECTOR, "button.describe").click()
    wait(browser).until(lambda d: "Guides to brewing tea" in d.find_element(
        By.CSS_SELECTOR, f'#corpora-table tr[data-corpus="{SEEN}"] .description').text)
    status, out = call(f"{live.url}/v1/vectors/corpora/{SEEN}", None, live.auth)
    assert status == 200 and out["description"] == "Guides to brewing tea"
    call(f"{live.url}/v1/vectors/corpora/{SEEN}", {"description": "Tea brewing guides"},
         live.auth, method="PATCH")
