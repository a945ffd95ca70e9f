"""Any id the API accepts can be read, listed and deleted, through the gateway and the client.

Ids hold what real pages and documents hold: braces (the tldr page `{.md` syncs as
`{.md#0`), `#`, `%`, `?`, `/`, spaces, non-ASCII letters and `..` inside an id. A path
carries an id percent-encoded as one segment (RFC 3986); "." and "..", which no URL can
carry as a segment, are refused at write time with a 400 naming the id.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

import lakehouse
from tests.client.conftest import Live

ODD_IDS = [
    "{.md#0", "}.md#0", "{}", "a#b", "100%", "50%25", "%2F", "what?now", "a?b=c&d",
    "a/b", "/leading", "trailing/", "a/../b", "../up", "..md", "...", "a..b",
    "two words", " padded ", "naïve café", "日本語のページ", "emoji 🚲", "tab\there",
    "semi;colon", "plus+sign", "at@home", "~tilde", "[x]", "back\\slash", "quote\"d",
]


def _vector(n: int) -> list[float]:
    return [1.0, float(n), 0.5]


@pytest.fixture
def toy(client: lakehouse.Client) -> Iterator[str]:
    """A corpus of 3-dimensional vectors holding one item per odd id."""
    name = f"ids_{uuid.uuid4().hex[:10]}"
    client.create_corpus(name, 3, model="toy")
    items = [lakehouse.Item(id=i, text=f"item {n}", title=f"title {n}", vector=_vector(n))
             for n, i in enumerate(ODD_IDS)]
    assert client.upsert(name, items, model="toy") == len(ODD_IDS)
    yield name
    client.delete_corpus(name)


def _raw_get(live: Live, path: str) -> tuple[int, dict[str, object]]:
    req = urllib.request.Request(f"{live.url}{path}",
                                 headers={"Authorization": f"Bearer {live.token}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_every_id_reads_back_through_the_client(client: lakehouse.Client, toy: str) -> None:
    for n, item_id in enumerate(ODD_IDS):
        got = client.get_item(toy, item_id, vector=True)
        assert (got.id, got.title, got.vector) == (item_id, f"title {n}", _vector(n)), item_id
    listed = [row.id for row in client.iter_ids(toy, page_size=7)]
    assert sorted(listed) == sorted(ODD_IDS)
    # Every listed id is read back: iter_items and iter_ids agree, id for id.
    assert [it.id for it in client.iter_items(toy, page_size=7)] == listed


def test_every_id_reads_back_percent_encoded_through_the_gateway(live: Live, toy: str) -> None:
    """A plain HTTP client (urllib), the id percent-encoded as RFC 3986 asks."""
    for item_id in ODD_IDS:
        status, body = _raw_get(live, f"/v1/vectors/corpora/{toy}/items/{quote(item_id, safe='')}")
        assert status == 200 and body["id"] == item_id, (item_id, status, body)
    # A missing id is the item's own 404, naming it: never "no route".
    status, body = _raw_get(live, f"/v1/vectors/corpora/{toy}/items/{quote('{nope}', safe='')}")
    assert status == 404 and body["error"]["field"] == "id", body
    assert "item '{nope}' not found" in body["error"]["message"]


def test_every_id_is_deleted_and_gone(client: lakehouse.Client, toy: str) -> None:
    half = ODD_IDS[::2]
    assert client.delete_items(toy, half) == len(half)
    for item_id in half:
        with pytest.raises(lakehouse.NotFound) as gone:
            client.get_item(toy, item_id)
        assert gone.value.field == "id", item_id
    assert sorted(r.id for r in client.iter_ids(toy)) == sorted(ODD_IDS[1::2])
    assert client.delete_items(toy, ODD_IDS[1::2]) == len(ODD_IDS[1::2])
    assert list(client.iter_ids(toy)) == []


@pytest.mark.parametrize("item_id", [".", ".."])
def test_a_dot_segment_id_is_refused_at_write_time(client: lakehouse.Client, toy: str,
                                                   item_id: str) -> None:
    with pytest.raises(lakehouse.InvalidArgument) as refused:
        client.upsert(toy, [lakehouse.Item(id=item_id, text="x", vector=_vector(1))],
                      model="toy")
    assert refused.value.field == "items[0].id"
    assert repr(item_id) in refused.value.message and "read back" in refused.value.message
    with pytest.raises(lakehouse.InvalidArgument) as asked:
        client.get_item(toy, item_id)
    assert asked.value.field == "item_id"
