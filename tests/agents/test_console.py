"""The web console in a real headless Chromium (Debian's chromium + chromium-driver).

Against the running stack with auth on: the page asks for the token, searches across
both corpora, shows corpus badges, records "right answer" and shows the hit boosted and
moved up on the next search; markup in a document shows as text; the corpora and sync
pages work; the page talks to no host but its own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.agents.conftest import DOCS, GUIDES, NOTES, SCRIPT_ID, SCRIPT_TITLE, Live, call
from tests.helpers import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1500")
QUERY = "how hot should the water be for green tea"


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not Path(exe).exists():
            pytest.fail(f"{exe} missing: scripts/setup.sh installs chromium and chromium-driver")
    profile = tempfile.mkdtemp(prefix="lakehouse-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    # The driver's path is given, so Selenium Manager never downloads anything.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver: WebDriver, seconds: float = 60) -> WebDriverWait[WebDriver]:
    """A wait that tries again when the page draws a list again under a read of it."""
    return WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))


def search(driver: WebDriver, query: str, mode: str = "hybrid", k: int = 6) -> list[WebElement]:
    before = driver.find_element(By.TAG_NAME, "body").get_attribute("data-searches") or "0"
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query)
    Select(driver.find_element(By.ID, "mode")).select_by_value(mode)
    k_box = driver.find_element(By.ID, "k")
    k_box.clear()
    k_box.send_keys(str(k))
    driver.find_element(By.ID, "search-btn").click()
    wait(driver).until(lambda d: (d.find_element(By.TAG_NAME, "body").get_attribute("data-searches") or "0") != before)
    return driver.find_elements(By.CSS_SELECTOR, "#hits li.hit")


def hit_of(driver: WebDriver, corpus: str, item_id: str) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f'#hits li.hit[data-corpus="{corpus}"][data-id="{item_id}"]')


def test_token_then_search_feedback_and_boost(live: Live, browser: WebDriver, tmp_path: Path) -> None:
    browser.get(f"{live.url}/")
    # Auth is on: the page asks for a token when the API answers 401.
    dialog = wait(browser).until(ec.visibility_of_element_located((By.ID, "token-dialog")))
    dialog.find_element(By.ID, "token").send_keys(live.token)
    dialog.find_element(By.ID, "token-ok").click()
    wait(browser).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    picked = {e.get_attribute("value") for e in browser.find_elements(
        By.CSS_SELECTOR, '#corpus-list input[name="corpus"]') if e.is_selected()}
    assert {GUIDES, NOTES} <= picked

    hits = search(browser, QUERY)
    assert len(hits) == 6
    badges = [h.find_element(By.CSS_SELECTOR, ".badge.corpus").text for h in hits]
    assert badges == [h.get_attribute("data-corpus") for h in hits]
    assert {GUIDES, NOTES} <= set(badges)
    first = hits[0]
    assert first.find_element(By.CSS_SELECTOR, ".hit-scores").text  # per-layer scores shown
    assert first.find_elements(By.CSS_SELECTOR, ".layers .layer")  # and the matched layers
    assert not browser.find_elements(By.CSS_SELECTOR, "#hits .boosted")

    target = hits[1]
    corpus, item_id = target.get_attribute("data-corpus"), target.get_attribute("data-id")
    assert corpus and item_id
    target.find_element(By.CSS_SELECTOR, "button.right").click()
    wait(browser).until(lambda d: "recorded" in hit_of(d, corpus, item_id).find_element(
        By.CSS_SELECTOR, ".feedback-status").text)
    # The record's Lakehouse-LSN is kept for the tab and sent with the next search.
    lsn = browser.execute_script("return sessionStorage.getItem('lakehouse.lsn')")
    assert lsn and "/" in lsn, lsn

    # Feedback applies when asked, as in the CLI (--playbook) and the API (use_playbook).
    use_feedback = browser.find_element(By.ID, "use-playbook")
    assert not use_feedback.is_selected()
    search(browser, QUERY)
    assert hit_of(browser, corpus, item_id).get_attribute("data-rank") == "2"
    use_feedback.click()
    search(browser, QUERY)
    again = hit_of(browser, corpus, item_id)
    assert again.get_attribute("data-rank") == "1"
    assert "boosted" in again.find_element(By.CSS_SELECTOR, ".boosted").text
    assert again.find_element(By.CSS_SELECTOR, ".moved.up").text == "↑ from #2"
    assert "boosted by feedback" in browser.find_element(By.ID, "search-status").text
    # The learned ranker's current model and its figures show under the search box: one
    # recorded question is too few, so the model is the boost alone and says why.
    status, model = call(f"{live.url}/v1/matrix/ranker/train", {"wait": True}, live.auth)
    assert status == 200 and not model["used"], model
    search(browser, QUERY)
    wait(browser).until(lambda d: f"model {model['id']}" in d.find_element(
        By.ID, "ranker-status").text)
    shown = browser.find_element(By.ID, "ranker-status").text
    assert "too few records" in shown and "cross-validated nDCG@10" in shown, shown
    assert "the boost alone: too few records" in browser.find_element(By.ID, "search-status").text
    shot = tmp_path / "results.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot of the results page: {shot}")
    assert shot.stat().st_size > 10_000


def test_markup_in_a_document_shows_as_text(live: Live, browser: WebDriver, tmp_path: Path) -> None:
    hits = search(browser, "Tea markup test", mode="keyword", k=5)
    assert [h.get_attribute("data-id") for h in hits] == [SCRIPT_ID]
    hit = hits[0]
    assert hit.find_element(By.CSS_SELECTOR, "a.title").text == SCRIPT_TITLE
    assert '<script>window.__pwned = 3</script>' in hit.find_element(By.CSS_SELECTOR, ".snippet").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#hits script, #hits img")
    assert browser.execute_script("return window.__pwned === undefined") is True

    hit.find_element(By.CSS_SELECTOR, "a.title").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "item-title").text == SCRIPT_TITLE)
    assert '<img src=x onerror="window.__pwned = 2">' in browser.find_element(By.ID, "item-text").text
    assert browser.find_element(By.ID, "item-corpus").text == GUIDES
    assert browser.find_element(By.ID, "item-back").text == "← back to the results"
    assert not browser.find_elements(By.CSS_SELECTOR, "#view-item script, #view-item img")
    assert browser.execute_script("return window.__pwned === undefined") is True
    browser.save_screenshot(str(tmp_path / "item.png"))


def test_corpora_page_lists_the_corpora(live: Live, browser: WebDriver) -> None:
    browser.find_element(By.ID, "nav-corpora").click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#corpora-table tr[data-corpus="{NOTES}"]'))
    rows = {r.get_attribute("data-corpus"): [c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#corpora-table tbody tr")}
    # name, documents (written as text: none here), items, dim
    assert rows[GUIDES][:4] == [GUIDES, "0", "4", "384"]
    assert rows[NOTES][:4] == [NOTES, "0", "3", "384"]
    assert rows[GUIDES][5].startswith("english ") and rows[GUIDES][6] != "–"  # as stored; created


def test_sync_page_and_sync_now(live: Live, browser: WebDriver) -> None:
    browser.find_element(By.ID, "nav-sync").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "sync-status").text in ("idle", "a sync is running"))
    assert "wiki" in browser.find_element(By.ID, "sync-fields").text
    browser.find_element(By.ID, "sync-now").click()
    wait(browser, 300).until(lambda d: "unchanged" in d.find_element(By.ID, "sync-result").text)
    result = browser.find_element(By.ID, "sync-result").text
    counts = dict(re.findall(r"(added|updated|deleted|unchanged) (\d+)", result))
    # The wiki has 3 pages: new to this run, or already synced at start-up.
    assert int(counts["added"]) + int(counts["updated"]) + int(counts["unchanged"]) == 3, result
    assert "; 0 errors;" in result


def test_a_failed_sync_says_why_in_status_the_terminal_and_the_console(
        live: Live, browser: WebDriver) -> None:
    wiki, aside = live.tmp / "wiki", live.tmp / "wiki-aside"
    wiki.rename(aside)  # an unmounted wiki: the run fails as a whole (and deletes nothing)
    try:
        status, out = call(f"{live.url}/v1/sync/run", {}, live.auth)
        assert status == 200, out
        assert [e["path"] for e in out["errors"]] == ["."]
        why = out["errors"][0]["error"]
        assert "is not a directory" in why and str(wiki) in why
        _, sync = call(f"{live.url}/v1/sync/status", headers=live.auth)
        assert sync["last_run"]["errors"] == out["errors"]

        # `lakehouse status` names the failure and prints its message.
        shown = subprocess.run(
            [sys.executable, "-m", "internal.cli.main", "status", "--url", live.url],
            cwd=ROOT, env={**os.environ, "LAKEHOUSE_TOKEN": live.token}, capture_output=True,
            text=True, timeout=60)
        assert ["sync", "failed"] in [line.split()[:2] for line in shown.stdout.splitlines()], \
            shown.stdout
        assert f"sync error: {why}" in shown.stdout.splitlines(), shown.stdout

        # The terminal of `lakehouse up` shows syncd's warning with the message.
        def told() -> list[dict[str, Any]]:
            lines = (live.tmp / "up.log").read_text().splitlines()
            return [e for e in map(json.loads, filter(lambda x: x.startswith("{"), lines))
                    if e.get("event") == "sync_failed" and e.get("daemon") == "syncd"]

        WebDriverWait(browser, 10).until(lambda _: told())
        assert told()[-1]["error"] == why

        # The console's Sync page lists the error with its message.
        browser.find_element(By.ID, "nav-search").click()
        browser.find_element(By.ID, "nav-sync").click()
        wait(browser).until(lambda d: why in d.find_element(By.ID, "sync-errors").text)
        assert "error" in (browser.find_element(By.ID, "sync-status").get_attribute("class") or "")
    finally:
        aside.rename(wiki)
    status, out = call(f"{live.url}/v1/sync/run", {}, live.auth)
    assert status == 200 and out["errors"] == [], out


def test_the_page_has_an_icon_of_its_own(live: Live, browser: WebDriver) -> None:
    # No token needed (browsers ask for it by themselves), no other host, an image.
    with urllib.request.urlopen(f"{live.url}/favicon.ico", timeout=30) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("image/svg+xml")
        assert resp.read().startswith(b"<svg")
    browser.find_element(By.ID, "nav-search").click()
    icon = browser.find_element(By.CSS_SELECTOR, 'link[rel="icon"]').get_attribute("href")
    assert icon == f"{live.url}/console/favicon.svg"
    for src in (icon, f"{live.url}/favicon.ico"):
        size = browser.execute_async_script(
            "const done = arguments[arguments.length - 1]; const img = new Image();"
            "img.onload = () => done([img.naturalWidth, img.naturalHeight]);"
            "img.onerror = () => done(null); img.src = arguments[0];", src)
        assert size and size[0] > 0 and size[1] > 0, src


def test_ask_mode_exactly_when_smart_search_is_served(live: Live, browser: WebDriver) -> None:
    _, doc = call(f"{live.url}/openapi.json")
    served = "/v1/matrix/smart_search" in doc["paths"]
    browser.find_element(By.ID, "nav-search").click()
    modes = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "mode")).options]
    assert ("ask" in modes) == served
    if served:
        hits = search(browser, "what temperature for green tea and how long to brew espresso", mode="ask")
        assert hits
        assert browser.find_element(By.ID, "ask-details").is_displayed()
        assert browser.find_element(By.ID, "plan").text not in ("", "null")
        assert browser.find_elements(By.CSS_SELECTOR, "#iterations li")


def test_the_page_calls_only_its_own_origin(live: Live, browser: WebDriver) -> None:
    sent: list[tuple[str, str]] = []  # (document that asked, URL asked for)
    for entry in browser.get_log("performance"):  # type: ignore[no-untyped-call]
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            params = message["params"]
            sent.append((params.get("documentURL", ""), params["request"]["url"]))
    ours = [url for doc, url in sent if doc.startswith(f"{live.url}/")]
    assert any(u.startswith(f"{live.url}/v1/matrix/search") for u in ours)
    assert any(u == f"{live.url}/console/app.js" for u in ours)
    assert [u for u in ours if not u.startswith(f"{live.url}/")] == []
    # Nothing at all left the machine's own pages (the browser's blank tab is chrome://).
    internal = ("chrome:", "chrome-untrusted:", "about:", "data:")
    assert [u for _, u in sent if not u.startswith((f"{live.url}/", *internal))] == []


def test_highlights_mark_words_and_stored_markup_never_runs(live: Live, browser: WebDriver) -> None:
    browser.find_element(By.ID, "nav-search").click()
    hits = search(browser, "black tea boiling water", k=6)
    markup = hit_of(browser, GUIDES, SCRIPT_ID)
    snippet = markup.find_element(By.CSS_SELECTOR, ".snippet")
    marks = [m.text.lower() for m in snippet.find_elements(By.TAG_NAME, "mark")]
    assert {"black", "tea", "boiling", "water"} <= set(marks), marks
    assert '<img src=x onerror="window.__pwned = 2">' in snippet.text
    assert not browser.find_elements(By.CSS_SELECTOR, "#hits script, #hits img")
    assert browser.execute_script("return window.__pwned === undefined") is True
    # Only text nodes and <mark> elements inside a snippet.
    tags = browser.execute_script(
        "return [...document.querySelectorAll('#hits .snippet *')].map(e => e.tagName)")
    assert set(tags) <= {"MARK"} and hits


def test_facet_values_filter_on_click(live: Live, browser: WebDriver) -> None:
    search(browser, "green tea water", k=6)
    panel = browser.find_element(By.ID, "facets")
    assert panel.is_displayed()
    corpus = panel.find_element(By.CSS_SELECTOR, f'.facet[data-field="corpus"] button[data-value="{GUIDES}"]')
    assert corpus.text.startswith(f"{GUIDES} (")
    before = browser.find_element(By.TAG_NAME, "body").get_attribute("data-searches")
    corpus.click()
    wait(browser).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-searches") != before)
    hits = browser.find_elements(By.CSS_SELECTOR, "#hits li.hit")
    assert hits and {h.get_attribute("data-corpus") for h in hits} == {GUIDES}
    picked = browser.find_element(By.CSS_SELECTOR, f'#facets button.on[data-value="{GUIDES}"]')
    before = browser.find_element(By.TAG_NAME, "body").get_attribute("data-searches")
    picked.click()  # a second click lifts the filter
    wait(browser).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-searches") != before)
    hits = browser.find_elements(By.CSS_SELECTOR, "#hits li.hit")
    assert {GUIDES, NOTES} <= {h.get_attribute("data-corpus") for h in hits}


def test_a_corpus_is_browsable_with_a_text_filter(live: Live, browser: WebDriver) -> None:
    browser.find_element(By.ID, "nav-corpora").click()
    link = f'#corpora-table a[href="#/browse/{GUIDES}"]'

    def clicked(d: WebDriver) -> bool:  # the table may be drawn again under the click
        try:
            d.find_element(By.CSS_SELECTOR, link).click()
        except (NoSuchElementException, StaleElementReferenceException):
            return False
        return True

    wait(browser).until(clicked)
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#browse-list li")) == 4)
    assert browser.find_element(By.ID, "browse-next").get_attribute("disabled") is not None
    # Each item by its title, its id beside it; markup in a title shows as text.
    titles = {d["id"]: d["title"] for d in DOCS[GUIDES]}
    rows = browser.find_elements(By.CSS_SELECTOR, "#browse-list li")
    assert {r.get_attribute("data-id"): r.find_element(By.TAG_NAME, "a").text for r in rows} == titles
    assert [r.find_element(By.TAG_NAME, "code").text for r in rows] == [r.get_attribute("data-id") for r in rows]

    # An item opened from the list leads back to the list.
    browser.find_element(By.CSS_SELECTOR, '#browse-list li[data-id="g_espresso"] a').click()
    wait(browser).until(lambda d: d.find_element(By.ID, "item-title").text == "Espresso basics")
    back = browser.find_element(By.ID, "item-back")
    assert back.text == f"← back to the items of {GUIDES}"
    back.click()
    wait(browser).until(lambda d: d.find_element(By.ID, "view-browse").is_displayed())
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#browse-list li")) == 4)
    box = browser.find_element(By.ID, "browse-filter")
    box.send_keys("espresso")
    browser.find_element(By.ID, "browse-go").click()
    wait(browser).until(lambda d: [e.get_attribute("data-id") for e in d.find_elements(
        By.CSS_SELECTOR, "#browse-list li")] == ["g_espresso"])
    assert not browser.find_elements(By.CSS_SELECTOR, "#browse-list script, #browse-list img")


CONSOLE_IDS = ["{.md#0", "}.md#0", "a#b", "100%", "what?now", "a/b", "a/../b", "two words",
               "naïve café"]


def test_items_of_any_id_are_browsed_and_opened(live: Live, browser: WebDriver) -> None:
    """Ids percent-encoded in the console's URLs: each listed id opens its own item."""
    corpus = "kb_ids"
    status, out = call(f"{live.url}/v1/vectors/corpora", {"name": corpus, "dim": 3,
                                                          "model": "toy"}, live.auth)
    assert status == 201, out
    items = [{"id": i, "title": f"odd id {n}", "text": f"item {n}", "vector": [1.0, n, 0.5]}
             for n, i in enumerate(CONSOLE_IDS)]
    status, out = call(f"{live.url}/v1/vectors/corpora/{corpus}/items",
                       {"items": items, "model": "toy"}, live.auth)
    assert status == 200, out
    try:
        browser.get(f"{live.url}/")
        browser.execute_script("sessionStorage.setItem('lakehouse-token', arguments[0])",
                               live.token)
        browser.get(f"{live.url}/#/browse/{corpus}")
        wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#browse-list li"))
                            == len(CONSOLE_IDS))
        listed = [e.get_attribute("data-id") for e in
                  browser.find_elements(By.CSS_SELECTOR, "#browse-list li")]
        assert sorted(listed) == sorted(CONSOLE_IDS)
        click = ("const li = [...document.querySelectorAll('#browse-list li')]"
                 ".find((e) => e.dataset.id === arguments[0]);"
                 "if (!li) return false; li.querySelector('a').click(); return true;")
        for item_id in listed:
            browser.get(f"{live.url}/#/browse/{corpus}")
            wait(browser).until(lambda d, i=item_id: d.execute_script(click, i))
            wait(browser).until(lambda d, i=item_id: d.find_element(By.ID, "item-id").text == i)
            assert browser.find_element(By.ID, "item-title").text == \
                f"odd id {CONSOLE_IDS.index(item_id)}"
    finally:
        call(f"{live.url}/v1/vectors/corpora/{corpus}", None, live.auth, method="DELETE")
