"""The console's key page in a real headless Chromium, on the shared stack (conftest.py).

An admin lists keys (no secret on the page), creates one (its secret shown once, then
gone), and revokes it (the secret stops opening anything); a key name carrying markup shows
as text. A key that is not an admin's is not offered the page.
"""

from __future__ import annotations

import time

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec

from tests.agents.conftest import GUIDES, Live, call
from tests.agents.test_console import browser, wait  # noqa: F401 (browser: a fixture)
from tests.agents.test_keys import _key

MARKUP_NAME = '<img src=x onerror="window.__pwned = 5">reporting app'


def _use(browser: WebDriver, live: Live, secret: str, page: str = "#/") -> None:  # noqa: F811
    """Open the console as the holder of `secret` (the token the page keeps for its tab)."""
    browser.get(f"{live.url}/")
    browser.execute_script("sessionStorage.setItem('lakehouse-token', arguments[0])", secret)
    browser.get(f"{live.url}/{page}")
    browser.refresh()
    wait(browser).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")


def _rows(browser: WebDriver) -> dict[str, list[str]]:  # noqa: F811
    return {r.get_attribute("data-key") or "": [c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#keys-table tbody tr")}


def test_admin_lists_creates_and_revokes_keys(live: Live, browser: WebDriver) -> None:  # noqa: F811
    listed = _key(live, "listed before", ["search"], [GUIDES])
    _use(browser, live, live.token, "#/keys")
    assert browser.find_element(By.ID, "nav-keys").is_displayed()
    wait(browser).until(lambda d: listed["id"] in _rows(d))
    assert _rows(browser)[listed["id"]][1:4] == ["listed before", "search", GUIDES]
    assert listed["key"] not in browser.page_source  # a list never holds a secret

    browser.find_element(By.ID, "key-name").send_keys(MARKUP_NAME)
    for box in browser.find_elements(By.CSS_SELECTOR, '#key-actions input[name="action"]'):
        if box.is_selected() != (box.get_attribute("value") == "read"):
            box.click()
    browser.find_element(By.ID, "key-corpora").send_keys(GUIDES)
    browser.find_element(By.ID, "key-create").click()
    secret_box = wait(browser).until(ec.visibility_of_element_located((By.ID, "key-secret")))
    secret = secret_box.text
    key_id = browser.find_element(By.ID, "key-secret-id").text
    assert secret.startswith(f"lhk_{key_id}_"), secret
    wait(browser).until(lambda d: key_id in _rows(d))
    row = _rows(browser)[key_id]
    assert row[1:4] == [MARKUP_NAME, "read", GUIDES]  # the name's markup shown as text
    assert not browser.find_elements(By.CSS_SELECTOR, "#keys-table img, #keys-table script")
    assert row[5].endswith(" UTC") and row[6] == "–"  # created; never used yet
    boxes = browser.find_elements(By.CSS_SELECTOR, '#key-actions input[name="action"]')
    assert [b.get_attribute("value") for b in boxes if b.is_selected()] == ["search"]  # reset
    assert browser.execute_script("return window.__pwned === undefined") is True
    # The secret opens what the page said: its corpus, read only.
    status, out = call(f"{live.url}/v1/vectors/corpora", None, {"Authorization": f"Bearer {secret}"})
    assert status == 200 and [c["name"] for c in out["corpora"]] == [GUIDES], out

    # Shown once: leaving the page forgets it, and the list never had it.
    browser.find_element(By.ID, "nav-corpora").click()
    browser.find_element(By.ID, "nav-keys").click()
    wait(browser).until(lambda d: key_id in _rows(d))
    assert not browser.find_element(By.ID, "key-created").is_displayed()
    assert secret not in browser.page_source
    stored = browser.execute_script(
        "return JSON.stringify(Object.assign({}, sessionStorage, localStorage))")
    assert secret not in stored

    button = browser.find_element(By.CSS_SELECTOR, f'#keys-table tr[data-key="{key_id}"] button.revoke')
    button.click()

    def confirmed(d: WebDriver) -> bool:
        try:
            d.switch_to.alert.accept()
        except NoAlertPresentException:
            return False
        return True

    wait(browser, 10).until(confirmed)
    wait(browser).until(lambda d: key_id not in _rows(d))
    assert listed["id"] in _rows(browser)
    time.sleep(1.0)  # every gateway re-reads a key within 0.5 s
    status, _ = call(f"{live.url}/v1/vectors/corpora", None, {"Authorization": f"Bearer {secret}"})
    assert status == 401


def test_the_key_page_is_not_offered_to_other_keys(live: Live, browser: WebDriver) -> None:  # noqa: F811
    for actions in (["search"], ["read", "write", "feedback"]):
        secret = _key(live, f"not admin {actions}", actions, [GUIDES])["key"]
        _use(browser, live, secret, "#/keys")
        assert not browser.find_element(By.ID, "nav-keys").is_displayed()
        # Asked for by its address, the page shows the API's refusal and no key.
        wait(browser).until(lambda d: "forbidden" in d.find_element(By.ID, "keys-status").text)
        assert _rows(browser) == {}
    _use(browser, live, live.token)
    assert browser.find_element(By.ID, "nav-keys").is_displayed()


def test_a_search_key_is_offered_no_link_it_may_not_follow(live: Live, browser: WebDriver  # noqa: F811
                                                          ) -> None:
    """A key that searches but may not read is shown its corpora and its hits, with no link
    to a corpus's items or to an item (each would answer `forbidden`)."""
    secret = _key(live, "search only", ["search"], [GUIDES])["key"]
    _use(browser, live, secret, "#/corpora")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#corpora-table tbody tr"))
    assert not browser.find_elements(By.CSS_SELECTOR, "#corpora-table a")
    assert [r.get_attribute("data-corpus") for r in browser.find_elements(
        By.CSS_SELECTOR, "#corpora-table tbody tr")] == [GUIDES]
    assert not browser.find_element(By.ID, "nav-sync").is_displayed()
    browser.find_element(By.ID, "nav-search").click()
    browser.find_element(By.ID, "q").send_keys("green tea water temperature")
    browser.find_element(By.ID, "search-btn").click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#hits li.hit"))
    assert browser.find_elements(By.CSS_SELECTOR, "#hits .title")
    assert not browser.find_elements(By.CSS_SELECTOR, "#hits a.title")
    # The admin token is offered both.
    _use(browser, live, live.token, "#/corpora")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#corpora-table a"))
