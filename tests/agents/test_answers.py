"""Answers on the shared stack (tests/agents/conftest.py, auth on, the answers' model a
fake that echoes every passage it is given): the MCP tool over both transports, and
scopes: an answer never cites or quotes, nor gives the model, an item the key or tenant
token cannot read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec

import lakehouse
from tests.agents.conftest import GUIDES, NOTES, Live, call
from tests.agents.test_console import browser, search, wait  # noqa: F401 (browser: a fixture)
from tests.agents.test_keys import (  # noqa: F401 (keys, tenant_key: fixtures)
    SECRET_WORD,
    TENANTS,
    A,
    B,
    Keys,
    keys,
    tenant_key,
)
from tests.agents.test_mcp import TRANSPORTS, structured, text_of

TEA = "What water temperature does green tea need?"


def answer(live: Live, body: dict[str, Any], header: str) -> tuple[int, Any]:
    return call(f"{live.url}/v1/matrix/answer", body, {"Authorization": header})


def prompts_since(live: Live, before: int) -> str:
    """Everything the model was sent since `before` requests."""
    return json.dumps(live.chat.requests[before:])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_answer_tool(live: Live, transport: str) -> None:
    async with TRANSPORTS[transport](live) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "answer" in tools and "rather than search" in (tools["answer"].description or "")
        assert tools["answer"].input_schema["required"] == ["query"]
        quoted = await session.call_tool("answer", {"query": TEA, "generator": "extractive",
                                                    "corpora": [GUIDES, NOTES]})
        written = await session.call_tool("answer", {"query": TEA, "max_words": 30})
        refused = await session.call_tool("answer", {"query": "Which river flows through "
                                                              "Ulaanbaatar?"})
    out = structured(quoted)
    assert out["answered"] and out["generator"]["kind"] == "extractive"
    assert "80" in out["text"] and {c["corpus"] for c in out["citations"]} <= {GUIDES, NOTES}
    text = text_of(quoted)
    assert text.startswith(out["text"]) and "Sources:" in text and "[1] [" in text
    model = structured(written)
    assert model["generator"]["kind"] == "openai" and model["citations"], model
    no = structured(refused)
    assert no["answered"] is False and no["hits"]
    assert text_of(refused).startswith("No answer:")


@pytest.mark.parametrize("stream", [False, True])
def test_a_scoped_key_answers_from_its_corpora_only(live: Live, keys: Keys,  # noqa: F811
                                                    stream: bool) -> None:
    """The echoing model is given, and the answer cites, only what the key may read."""
    before = len(live.chat.requests)
    body = {"query_text": "tea notes of keys", "k": 20, "generator": "model", "stream": stream}
    header = keys.secrets["search"]
    if stream:
        out = _streamed(live, body, header)
    else:
        status, out = answer(live, body, header)
        assert status == 200, out
    assert out["answered"], out
    assert {c["corpus"] for c in out["citations"]} == {A}
    assert {h["corpus"] for h in out["hits"]} == {A}
    sent = prompts_since(live, before)
    assert f"tea notes of {A}" in sent and B not in sent and GUIDES not in sent
    assert f"tea notes of {A}" in out["text"] and B not in json.dumps(out)
    # The key's corpora named outright: a corpus outside it is one that does not exist.
    status, err = answer(live, {**body, "stream": False, "corpora": [A, B]}, header)
    assert status == 404 and B in err["error"]["message"]
    assert len(live.chat.requests) == before + 1


@pytest.mark.parametrize("tenant", ["a", "c"])
def test_a_tenant_token_answers_from_its_rows_only(live: Live, tenant_key: str,  # noqa: F811
                                                   tenant: str) -> None:
    token = lakehouse.tenant_token(tenant_key, filter={"metadata": {"tenant": tenant}},
                                   expires_in=600)
    before = len(live.chat.requests)
    for query in ("green tea espresso cold brew", SECRET_WORD):
        status, out = answer(live, {"query_text": query, "k": 20, "generator": "model",
                                    "use_playbook": True}, f"Bearer {token}")
        assert status == 200, out
        assert all((h.get("metadata") or {}).get("tenant") == tenant for h in out["hits"]
                   if h["corpus"] == TENANTS), out["hits"]
        rows = {h["id"] for h in out["hits"]}
        assert all(c["id"] in rows for c in out["citations"])
        assert SECRET_WORD not in out["text"] + json.dumps(out["citations"])
    # Tenant b's rows hold the secret word: no prompt ever carried one of them.
    sent = prompts_since(live, before)
    assert SECRET_WORD not in sent.replace(f'Question: {SECRET_WORD}', "")


def test_feedback_on_an_answer_needs_the_feedback_action(live: Live, keys: Keys  # noqa: F811
                                                        ) -> None:
    status, out = answer(live, {"query_text": "tea notes", "generator": "extractive"},
                         keys.secrets["search"])
    cited = [{"corpus": c["corpus"], "id": c["id"]} for c in out["citations"]]
    body = {"query_text": "tea notes", "cited": cited, "score": 1}
    status, err = call(f"{live.url}/v1/matrix/answer/feedback", body,
                       {"Authorization": keys.secrets["search"]})
    assert status == 403 and "feedback action" in err["error"]["message"]
    status, done = call(f"{live.url}/v1/matrix/answer/feedback", body,
                        {"Authorization": keys.secrets["feedback"]})
    assert status == 200 and len(done["recorded"]) == len(cited), done
    status, err = call(f"{live.url}/v1/matrix/answer/feedback",
                       {**body, "cited": [{"corpus": B, "id": f"{B}_1"}]},
                       {"Authorization": keys.secrets["feedback"]})
    assert status == 404 and err["error"]["field"] == "cited[0].corpus"


def _streamed(live: Live, body: dict[str, Any], header: str) -> dict[str, Any]:
    """The `done` event's answer of a streamed answer."""
    import urllib.request

    req = urllib.request.Request(f"{live.url}/v1/matrix/answer", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": header})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        frames = resp.read().decode().split("\n\n")
    events = [json.loads(f.split("data: ", 1)[1]) for f in frames if "data: {" in f]
    assert events[0]["type"] == "citations" and events[-1]["type"] == "done"
    done: dict[str, Any] = events[-1]["answer"]
    return done


def test_the_console_answers_above_the_hits(live: Live, browser: WebDriver,  # noqa: F811
                                            tmp_path: Path) -> None:
    browser.get(f"{live.url}/")
    dialog = wait(browser).until(ec.visibility_of_element_located((By.ID, "token-dialog")))
    dialog.find_element(By.ID, "token").send_keys(live.token)
    dialog.find_element(By.ID, "token-ok").click()
    wait(browser).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    assert browser.find_element(By.ID, "with-answer").is_selected()
    hits = search(browser, "black tea boiling water", k=6)
    panel = browser.find_element(By.ID, "answer")
    wait(browser).until(lambda _: panel.get_attribute("data-state") == "answered")
    # Above the hits, its markers linking to the items they cite.
    assert panel.location["y"] < hits[0].location["y"]
    citations = panel.find_elements(By.CSS_SELECTOR, "#answer-citations li.citation")
    markers = panel.find_elements(By.CSS_SELECTOR, "#answer-text a.marker")
    assert citations and markers
    first = citations[0]
    corpus, item_id = first.get_attribute("data-corpus"), first.get_attribute("data-id")
    assert markers[0].get_attribute("href").endswith(f"#/item/{corpus}/{item_id}")
    assert first.find_element(By.CSS_SELECTOR, ".passage").text
    # The echoing model quotes the markup document: shown as text, never run.
    assert "<script>" in panel.text
    assert not browser.find_elements(By.CSS_SELECTOR, "#answer script, #answer img")
    assert browser.execute_script("return window.__pwned === undefined") is True
    # The cited hits are marked in the list.
    cited = browser.find_elements(By.CSS_SELECTOR, "#hits li.hit .cited")
    assert cited and all(c.text.startswith("cited [") for c in cited)
    shot = tmp_path / "answer.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot of the answer panel: {shot}")
    # Feedback: one cited hit, then the whole answer (each cited hit recorded).
    first.find_element(By.CSS_SELECTOR, "button.right").click()
    wait(browser).until(lambda _: "recorded as right" in first.text)
    browser.find_element(By.ID, "answer-wrong").click()
    wait(browser).until(lambda d: "cited hits as wrong" in d.find_element(
        By.ID, "answer-feedback-status").text)
    _, listed = call(f"{live.url}/v1/matrix/playbooks?answer_id={item_id}&answer_corpus={corpus}",
                     headers=live.auth)
    assert {e["query_text"] for e in listed["entries"]} >= {"black tea boiling water"}
    # A citation's title opens its item.
    first.find_element(By.CSS_SELECTOR, "a.title").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "item-id").text == item_id)
    browser.back()
