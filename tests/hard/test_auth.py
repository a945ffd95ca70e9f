"""With tokens configured, no daemon answers without one."""

from __future__ import annotations

import pytest

from tests.hard.conftest import TOKEN, HardStack

ROUTES = {
    "embedd": "/v1/embed/models",
    "vectord": "/v1/vectors/corpora",
    "matrixd": "/v1/matrix/corpora",
    "syncd": "/v1/sync/status",
    "gateway": "/v1/vectors/corpora",
}


@pytest.mark.parametrize("daemon", list(ROUTES))
def test_no_token_no_answer(hard_stack: HardStack, daemon: str) -> None:
    url = hard_stack.urls[daemon] + ROUTES[daemon]
    out = hard_stack.call("GET", url, token=None)
    assert out.status == 401, out.body
    assert out.body["error"]["code"] == "unauthorized"
    assert hard_stack.call("GET", url, token="not-a-token").status == 401
    # Health stays open for supervisors and load balancers.
    assert hard_stack.call("GET", hard_stack.urls[daemon] + "/healthz", token=None).status == 200


@pytest.mark.parametrize("daemon", ["embedd", "vectord", "matrixd"])
def test_client_token_accepted_by_daemons(hard_stack: HardStack, daemon: str) -> None:
    out = hard_stack.call("GET", hard_stack.urls[daemon] + ROUTES[daemon], token=TOKEN)
    assert out.status == 200, out.body


def test_daemons_reach_each_other_with_the_service_token(hard_stack: HardStack,
                                                         corpus: str) -> None:
    """matrixd embeds (embedd) and searches (vectord) behind auth: the service token works."""
    out = hard_stack.call("POST", f"{hard_stack.gateway}/v1/matrix/search",
                          {"corpora": [corpus], "query_text": "a hot drink", "k": 1})
    assert out.status == 200, out.body
    assert out.body["hits"][0]["id"] == "d1"
    assert out.body["degraded"] == []
