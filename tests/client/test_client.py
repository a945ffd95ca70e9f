"""lakehouse.Client against the real stack: every route group, typed results, errors."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

import lakehouse
from lakehouse import types
from tests.client.conftest import Live

PRINTER = "printer jams after new toner"


def _name() -> str:
    return f"c_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def scratch(client: lakehouse.Client) -> Iterator[str]:
    """A fresh corpus for the stack's model, deleted afterwards."""
    name = _name()
    client.create_corpus(name)
    yield name
    client.delete_corpus(name)


def test_readme_example_finds_the_ticket_first(client: lakehouse.Client) -> None:
    found = client.search(PRINTER, corpora=["handbook", "tickets"], k=3)
    assert isinstance(found, types.MatrixSearchResponse)
    assert (found.hits[0].corpus, found.hits[0].id) == ("tickets", "T-1042#0")
    assert found.hits[0].document_id == "T-1042"
    assert {h.corpus for h in found.hits} == {"handbook", "tickets"}
    assert all(isinstance(h, types.MatrixHit) and h.score is not None for h in found.hits)
    assert found.mode == "hybrid" and [h.rank for h in found.hits] == [1, 2, 3]


def test_corpora_create_get_list_delete(client: lakehouse.Client) -> None:
    name = _name()
    made = client.create_corpus(name)
    assert isinstance(made, types.Corpus) and isinstance(made.created_at, datetime)
    assert (made.dim, made.model, made.count) == (384, "all-MiniLM-L6-v2-int8", 0)
    assert client.get_corpus(name) == made
    assert name in {c.name for c in client.list_corpora()}
    with pytest.raises(lakehouse.Conflict) as conflict:
        client.create_corpus(name)
    err = conflict.value
    assert (err.status, err.code, err.field) == (409, "conflict", "name")
    assert err.request_id and name in err.message
    client.delete_corpus(name)
    with pytest.raises(lakehouse.NotFound) as missing:
        client.get_corpus(name)
    assert missing.value.code == "corpus_not_found" and missing.value.request_id


def test_precision_convert_and_storage(client: lakehouse.Client) -> None:
    """A float32 corpus converted to float16 online; the storage figures show it."""
    name = _name()
    made = client.create_corpus(name, precision="float32")
    try:
        assert made.precision == "float32"
        client.upsert(name, [{"id": f"n{i}", "text": f"note {i} about the VPN"}
                             for i in range(20)])
        started = client.convert(name, "float16")
        assert isinstance(started, types.ConvertStarted) and started.precision == "float16"
        deadline = time.monotonic() + 60
        while (c := client.get_corpus(name)).precision != "float16" or c.conversion:
            assert time.monotonic() < deadline, c
            time.sleep(0.2)
        found = client.search("VPN note 7", corpora=name, k=1)
        assert [h.id for h in found.hits] == ["n7"]
        storage = client.storage()
        row = next(r for r in storage.corpora if r.name == name)
        assert (row.precision, row.rows) == ("float16", 20) and row.index_bytes > 0
        assert storage.memory.vectord_bytes > 0 and storage.warmup.state in ("warming", "done")
    finally:
        client.delete_corpus(name)


def test_text_upsert_is_embedded_by_the_stack(client: lakehouse.Client, scratch: str) -> None:
    items: list[lakehouse.Item | dict[str, Any]] = [
        lakehouse.Item(id="vpn", title="VPN", text="Install the VPN client first.",
                       tags=["network"]),
        {"id": "wifi", "text": "The guest Wi-Fi password changes every Monday."}]
    assert client.upsert(scratch, items) == 2
    got = client.get_item(scratch, "vpn", vector=True)
    assert isinstance(got, types.StoredItem) and got.vector is not None and len(got.vector) == 384
    assert client.get_item(scratch, "vpn").vector is None  # a vector only when asked
    # A text upsert is a document of one chunk, stored under the item's id.
    assert got.metadata == {"parent_id": "vpn"} and client.get_document(scratch, "vpn").chunks == ["vpn"]
    assert (got.title, got.tags, got.corpus) == ("VPN", ["network"], scratch)
    found = client.search("guest wifi password", corpora=scratch, k=1)
    assert [h.id for h in found.hits] == ["wifi"]


def test_vector_upsert_iterate_and_delete(client: lakehouse.Client) -> None:
    name = _name()
    client.create_corpus(name, 3, model="toy")
    try:
        items = [lakehouse.Item(id=f"i{n}", text=f"item {n}", vector=[1.0, float(n), 0.5])
                 for n in range(5)]
        before = client.lsn
        assert client.upsert(name, items, model="toy") == 5
        # The write's position is kept and sent with the searches that follow.
        assert client.lsn is not None and client.lsn != before
        rows = list(client.iter_ids(name, page_size=2))
        assert [r.id for r in rows] == ["i0", "i1", "i2", "i3", "i4"]
        assert all(isinstance(r, types.IdRow) and len(r.content_hash) == 64 for r in rows)
        stored = list(client.iter_items(name, prefix="i", page_size=2, vector=True))
        assert [(s.id, (s.vector or [])[1]) for s in stored] == [
            (f"i{n}", float(n)) for n in range(5)]
        found = client.search(vector=[1.0, 4.0, 0.5], corpora=[name], mode="vector", k=1)
        assert found.hits[0].id == "i4" and found.hits[0].distance is not None
        assert client.delete_items(name, ["i0", "i1", "nope"]) == 2
        with pytest.raises(lakehouse.NotFound):
            client.get_item(name, "i0")
        assert client.get_corpus(name).count == 3
    finally:
        client.delete_corpus(name)


def test_an_error_names_its_field_and_request(client: lakehouse.Client, scratch: str) -> None:
    with pytest.raises(lakehouse.InvalidArgument) as bad:
        client.upsert(scratch, [lakehouse.Item(id="x", text="t", vector=[1.0, 2.0])])
    err = bad.value
    assert (err.status, err.code, err.field) == (400, "invalid_argument", "items[0].vector")
    assert "expected 384 numbers" in err.message and err.request_id
    with pytest.raises(lakehouse.Conflict) as mismatch:  # another model's label: a 409
        client.upsert(scratch, [lakehouse.Item(id="x", text="t", vector=[0.1] * 384)],
                      model="another-model")
    assert (mismatch.value.status, mismatch.value.code) == (409, "model_mismatch")
    with pytest.raises(lakehouse.InvalidArgument) as k0:
        client.search("x", k=0)
    assert k0.value.field == "k"


def test_a_wrong_token_is_unauthorized(live: Live) -> None:
    with lakehouse.Client(live.url, "not-the-token") as bad, \
            pytest.raises(lakehouse.Unauthorized) as denied:
        bad.list_corpora()
    assert (denied.value.status, denied.value.code) == (401, "unauthorized")


def test_every_search_mode(client: lakehouse.Client) -> None:
    both = ["handbook", "tickets"]
    vector = client.search(PRINTER, corpora=both, mode="vector", k=3)
    assert vector.mode == "vector"
    assert all(h.score is None and h.distance is not None for h in vector.hits)
    lexical = client.search(PRINTER, corpora=both, mode="lexical", k=3)
    assert lexical.mode == "lexical"
    assert all(h.scores["lexical"] and h.scores["vector"] is None for h in lexical.hits)
    hybrid = client.search(PRINTER, corpora=both, mode="hybrid", k=3, fusion="weighted",
                           weights={"vector": 0.7, "lexical": 0.3}, candidates=20,
                           prf=lakehouse.Prf(docs=0))
    assert hybrid.hits[0].matched_layers == ["vector", "lexical"]
    keyword = client.search("orange sealing tape", corpora=both, mode="keyword", k=5)
    assert {h.id for h in keyword.hits} == {"T-1042#0", "toner#0"}


def test_search_across_every_corpus_with_filters(client: lakehouse.Client) -> None:
    everywhere = client.search("VPN at home", k=10)
    assert {"handbook", "tickets"} <= {c.corpus for c in everywhere.corpora}
    tagged = client.search("VPN at home", k=10, filter=lakehouse.Filter(tags_any=["network"]))
    assert tagged.hits and all("network" in h.tags for h in tagged.hits)
    solved = client.search("printer", corpora="tickets", k=10,
                           filter={"metadata": {"status": "solved"}})
    assert solved.hits and all(h.metadata["status"] == "solved" for h in solved.hits)
    tilted = client.search(PRINTER, corpora=["handbook", "tickets"], k=3,
                           corpus_weights={"handbook": 10.0})
    assert tilted.hits[0].corpus == "handbook"


def test_feedback_record_list_use_delete(client: lakehouse.Client) -> None:
    query = f"how do I set up the VPN at home {uuid.uuid4().hex[:6]}"
    right = client.record(query, "vpn", "handbook")
    wrong = client.wrong(query, "T-1043", "tickets", tags=["test"])
    assert isinstance(right, types.RecordResponse) and right.created
    listed = client.playbooks(answer_corpus="tickets", limit=1000)
    entry = next(e for e in listed.entries if e.playbook_id == wrong.playbook_id)
    assert (entry.score, entry.tags, entry.query_text) == (-1.0, ["test"], query)
    found = client.search(query, corpora=["handbook", "tickets"], k=3, use_playbook=True)
    assert found.playbook is not None and found.playbook.entries >= 2
    # Recorded by the documents' ids: applied to their chunks.
    assert found.hits[0].id == "vpn#0" and found.hits[0].boost_factor < 1
    assert "T-1043#0" not in [h.id for h in found.hits]
    for pid in (right.playbook_id, wrong.playbook_id):
        assert client.delete_playbook(pid).deleted == pid
    with pytest.raises(lakehouse.NotFound) as gone:
        client.delete_playbook(right.playbook_id)
    assert gone.value.field == "playbook_id"


def test_sync_run_and_status(client: lakehouse.Client) -> None:
    run = client.run_sync()
    assert isinstance(run, types.SyncRun) and run.errors == [] and run.pages == 2
    status = client.sync_status()
    assert status.corpus == "wiki" and status.runs >= 1 and not status.running
    assert status.last_run is not None and status.last_run.errors == []
    assert client.get_corpus("wiki").count >= 2


def test_query_understanding(client: lakehouse.Client) -> None:
    question = "Who fixed the printer on floor 2 and why does the VPN drop?"
    analysis = client.analyze(question, now=datetime(2026, 10, 8))
    assert analysis.question_type == "multi-hop" and len(analysis.sub_queries) >= 2
    normal = client.normalize([lakehouse.ObservationIn(
        "I fixed it yesterday", reference_time="2024-05-08", speaker="Ann")])
    assert normal.observations[0].text == "Ann fixed it on 7 May 2024"
    assert normal.observations[0].dates == ["2024-05-07"]
    smart = client.smart_search(question, corpora=["handbook", "tickets"], k=4)
    assert smart.mode == "smart" and smart.analysis is not None and smart.hits
    assert smart.stopped in ("adequate", "max_iterations", "no_new_queries")
    auto = client.search_auto("guest password", corpora="handbook", k=3)
    assert auto.strategy == "lexical" and auto.hits[0].id == "wifi#0"


def test_embed_models_and_ensure_corpus(client: lakehouse.Client) -> None:
    listing = client.models()
    assert isinstance(listing, types.ModelsResponse)
    assert listing.default == "all-MiniLM-L6-v2-int8"
    assert any(m.id == listing.default and m.dim == 384 for m in listing.models)
    emb = client.embed(["VPN at home", "paper jam"], input_type="query")
    assert (emb.model, emb.dim, len(emb.vectors), len(emb.vectors[1])) == (
        "all-MiniLM-L6-v2-int8", 384, 2, 384)
    with pytest.raises(lakehouse.InvalidArgument) as blank:
        client.embed(["fine", "  "])
    assert blank.value.field == "texts[1]" and blank.value.request_id
    name = _name()
    made, created = client.ensure_corpus(name)
    try:
        assert created and (made.dim, made.model) == (384, "all-MiniLM-L6-v2-int8")
        assert client.ensure_corpus(name) == (made, False)  # there already: not made again
    finally:
        client.delete_corpus(name)
    with pytest.raises(lakehouse.InvalidArgument) as bad:
        client.ensure_corpus("Not A Name")
    assert bad.value.field == "name"


def test_request_reaches_any_route_and_answers_as_sent(client: lakehouse.Client) -> None:
    doc = client.request("GET", "/openapi.json")
    assert "/v1/matrix/search" in doc["paths"]
    found = client.request("POST", "/v1/matrix/search",
                           body={"query_text": PRINTER, "corpora": ["tickets"], "k": 1})
    assert found["hits"][0]["id"] == "T-1042#0" and isinstance(found["hits"][0], dict)
    with pytest.raises(lakehouse.InvalidArgument) as k0:
        client.request("POST", "/v1/matrix/search", body={"query_text": "x", "k": 0})
    assert k0.value.field == "k" and k0.value.request_id


def test_an_upsert_error_names_the_callers_item(client: lakehouse.Client) -> None:
    """Items go in batches; the error names the item's place in the caller's list."""
    name = _name()
    client.create_corpus(name, 3, model="toy")
    try:
        items = [lakehouse.Item(id=f"i{n}", text=f"item {n}", vector=[1.0, float(n), 0.5])
                 for n in range(300)]
        items[270] = lakehouse.Item(id="i270", text="item 270", vector=[1.0, 2.0])
        with pytest.raises(lakehouse.InvalidArgument) as bad:
            client.upsert(name, items, model="toy")
        assert bad.value.field == "items[270].vector", bad.value
        assert bad.value.message.startswith("items[270]") or "items[" not in bad.value.message
    finally:
        client.delete_corpus(name)


def test_empty_token_sends_none(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_TOKEN", live.token)
    with lakehouse.Client(live.url, "") as anonymous, \
            pytest.raises(lakehouse.Unauthorized):
        anonymous.list_corpora()
    with lakehouse.Client(live.url, "", headers={"Authorization": f"Bearer {live.token}"}) as c:
        assert {"handbook", "tickets"} <= {x.name for x in c.list_corpora()}


def test_ready_answers_even_when_not_ready(client: lakehouse.Client) -> None:
    """GET /readyz: each component's state; a stack that is not ready answers too (no
    raise, no retry), and nothing listening is an Unavailable naming the address."""
    ready = client.ready()
    assert isinstance(ready, types.Ready) and ready.status == "ok"
    assert {"embedd", "vectord", "matrixd"} <= set(ready.components)
    assert all(c.status == "ok" for c in ready.components.values())
    with lakehouse.Client("http://127.0.0.1:9", "", retries=0, timeout=2) as nobody:
        with pytest.raises(lakehouse.Unavailable) as err:
            nobody.ready()
    assert err.value.code == lakehouse.errors.UNREACHABLE and "127.0.0.1:9" in str(err.value)


# One refusal per wrapped route: (call, the exception class, the field it names). Each
# is answered by the stack itself; the field is the caller's own argument.
REFUSALS: list[tuple[str, Any, type[lakehouse.LakehouseError], str | None]] = [
    ("create_corpus", lambda c: c.create_corpus("Bad Name"), lakehouse.InvalidArgument, "name"),
    ("get_corpus", lambda c: c.get_corpus("no_such_corpus"), lakehouse.NotFound, None),
    ("delete_corpus", lambda c: c.delete_corpus("no_such_corpus"), lakehouse.NotFound, None),
    ("reembed", lambda c: c.reembed("handbook", "no-such-model"), lakehouse.InvalidArgument,
     "model"),
    ("upsert", lambda c: c.upsert("handbook", [{"id": "v", "text": "t", "vector": [1.0]}]),
     lakehouse.InvalidArgument, "items[0].vector"),
    ("get_item", lambda c: c.get_item("handbook", "no-such-item"), lakehouse.NotFound, "id"),
    ("delete_items", lambda c: c.delete_items("handbook", [""]), lakehouse.InvalidArgument,
     "ids[0]"),
    ("iter_ids", lambda c: list(c.iter_ids("handbook", page_size=0)), lakehouse.InvalidArgument,
     "limit"),
    ("embed", lambda c: c.embed([" "]), lakehouse.InvalidArgument, "texts[0]"),
    ("search", lambda c: c.search(PRINTER, k=0), lakehouse.InvalidArgument, "k"),
    ("smart_search", lambda c: c.smart_search(PRINTER, k=0), lakehouse.InvalidArgument, "k"),
    ("search_auto", lambda c: c.search_auto(PRINTER, k=0), lakehouse.InvalidArgument, "k"),
    ("analyze", lambda c: c.analyze(" "), lakehouse.InvalidArgument, "query_text"),
    ("normalize", lambda c: c.normalize(["x"] * 1001), lakehouse.PayloadTooLarge,
     "observations"),
    ("record", lambda c: c.record(PRINTER, "no-such-answer", "tickets"), lakehouse.NotFound,
     "answer_id"),
    ("wrong", lambda c: c.wrong(PRINTER, "T-1042", "no_such_corpus"), lakehouse.NotFound,
     "answer_corpus"),
    ("playbooks", lambda c: c.playbooks(limit=0), lakehouse.InvalidArgument, "limit"),
    ("delete_playbook", lambda c: c.delete_playbook("0" * 64), lakehouse.NotFound,
     "playbook_id"),
]


@pytest.mark.parametrize(("route", "call", "kind", "field"), REFUSALS,
                         ids=[r[0] for r in REFUSALS])
def test_every_route_refuses_with_its_class_and_field(
        client: lakehouse.Client, route: str, call: Any,
        kind: type[lakehouse.LakehouseError], field: str | None) -> None:
    with pytest.raises(kind) as err:
        call(client)
    assert err.value.field == field, (route, err.value)
    assert err.value.request_id and err.value.code, route
