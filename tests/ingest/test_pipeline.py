"""The one ingest pipeline (internal.ingest) against the real vectord and embedd: only
what changed is embedded, a refused document (or the group it belongs to) is reported
and the rest goes in, stale ids go after the writes and never a failed group's, and a
failure of the stack stops the run or, when asked, costs only its batch."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import aiohttp
import pytest

from internal.api.vectord import Item
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common.errors import ServiceError, TooManyRequests
from internal.ingest import Doc, Pipeline, StackFailure, changed
from internal.ingest.pipeline import GROW_AFTER


def _name() -> str:
    return f"ing_{uuid.uuid4().hex[:10]}"


async def _corpus(vc: VectordClient, ec: EmbedClient) -> tuple[str, str]:
    model, dim = await ec.default_model()
    name = _name()
    await vc.create_corpus(name, dim, model=model)
    return name, model


async def _stored(vc: VectordClient, name: str) -> dict[str, str]:
    return {row.id: row.content_hash async for row in vc.iter_ids(name)}


async def test_only_changed_documents_are_written_and_hashes_match(
        vectord_url: str, embedd_url: str, http: aiohttp.ClientSession) -> None:
    vc, ec = VectordClient(http, vectord_url), EmbedClient(http, embedd_url)
    name, model = await _corpus(vc, ec)
    docs = [Doc(f"d{i}", f"text number {i}", title="T" if i % 2 else None, tags=["a"],
                metadata={"n": i}, language="english") for i in range(7)]
    pipe = Pipeline(vc, ec, name, model=model, batch=3, concurrency=2)
    report = await pipe.write(docs)
    assert report.upserted == 7 and report.embedded == 7 and not report.failed
    stored = await _stored(vc, name)
    assert stored == {d.id: d.content_hash() for d in docs}  # the hash vectord reports
    edited = [*docs[:6], Doc("d6", "an edited text", tags=["a"], metadata={"n": 6},
                             language="english"), Doc("blank", "  ")]
    todo, empty, unchanged = changed(edited, stored)
    assert [d.id for d in todo] == ["d6"] and [d.id for d in empty] == ["blank"]
    assert unchanged == 6


async def test_a_refused_document_costs_only_its_group(
        vectord_url: str, embedd_url: str, http: aiohttp.ClientSession) -> None:
    """A NUL in a text is refused by embedd (`texts[i]`), an id over 512 bytes by vectord
    (`items[i]`): each costs its own group (a page of two chunks), nothing else."""
    vc, ec = VectordClient(http, vectord_url), EmbedClient(http, embedd_url)
    name, model = await _corpus(vc, ec)
    docs = [Doc("a#0", "fine", group="a"), Doc("a#1", "fine too", group="a"),
            Doc("b#0", "bad \x00 text", group="b"), Doc("b#1", "fine", group="b"),
            Doc("c#0", "fine", group="c"), Doc("x" * 600, "fine", group="d"),
            Doc("e#0", "fine", group="e")]
    pipe = Pipeline(vc, ec, name, model=model, batch=10)
    report = await pipe.write(docs)
    assert set(report.failed) == {"b", "d"}
    assert isinstance(report.failed["b"][1], ServiceError)
    assert report.failed["b"][1].field is not None and report.failed["d"][1].field is not None
    assert sorted(await _stored(vc, name)) == ["a#0", "a#1", "c#0", "e#0"]
    # The failed page keeps its old chunks: its stale ids are not deleted.
    await vc.upsert(name, [Doc("b#9", "old chunk").item((await ec.embed(["old"])).vectors[0])],
                    model=model)
    await pipe.delete_stale({"b": ["b#9"], "c": ["c#0"]})
    assert sorted(await _stored(vc, name)) == ["a#0", "a#1", "b#9", "e#0"]
    assert pipe.report.deleted == 1


async def test_a_failure_of_the_stack_stops_or_costs_its_batch(
        vectord_url: str, embedd_url: str, http: aiohttp.ClientSession) -> None:
    vc, ec = VectordClient(http, vectord_url), EmbedClient(http, embedd_url)
    missing = _name()  # no such corpus: vectord answers 404, not the documents' fault
    model, _ = await ec.default_model()
    docs = [Doc(f"d{i}", f"text {i}", group=f"p{i // 2}") for i in range(4)]
    with pytest.raises(StackFailure) as err:
        await Pipeline(vc, ec, missing, model=model, batch=2).write(docs)
    assert isinstance(err.value.cause, ServiceError) and err.value.cause.status == 404
    pipe = Pipeline(vc, ec, missing, model=model, batch=2, stop_on_stack_failure=False)
    report = await pipe.write(docs)
    assert set(report.failed) == {"p0", "p1"} and report.upserted == 0


class _Refusing:
    """vectord with the gateway's share in front: every other upsert answered 429."""

    def __init__(self, store: VectordClient) -> None:
        self.store = store
        self.calls = 0
        self.sizes: list[int] = []

    async def upsert(self, name: str, items: Sequence[Item], model: str | None = None) -> int:
        self.calls += 1
        if self.calls % 2 == 1:
            refused = TooManyRequests("past this client's share", code="rate_limited")
            refused.retry_after = 0.0
            raise refused
        self.sizes.append(len(items))
        return await self.store.upsert(name, items, model=model)

    async def delete_items(self, name: str, ids: list[str]) -> int:
        return await self.store.delete_items(name, ids)


async def test_429s_are_waited_out_and_the_batches_shrink_then_grow(
        vectord_url: str, embedd_url: str, http: aiohttp.ClientSession) -> None:
    vc, ec = VectordClient(http, vectord_url), EmbedClient(http, embedd_url)
    name, model = await _corpus(vc, ec)
    refusing = _Refusing(vc)
    docs = [Doc(f"d{i}", f"text number {i}") for i in range(40)]
    notices: list[str] = []
    pipe = Pipeline(refusing, ec, name, model=model, batch=8, notice=notices.append)
    report = await pipe.write(docs)
    assert report.upserted == 40 and not report.failed
    assert sorted(await _stored(vc, name)) == sorted(d.id for d in docs)
    # Every batch met one 429: 8, then 4, 2, 1 and 1 from then on.
    assert refusing.sizes[:4] == [8, 4, 2, 1] and set(refusing.sizes[4:]) == {1}
    assert notices[0] == "rate limited (429): batches of 4 from now on"

    # Without 429s the size grows back towards `batch` after GROW_AFTER batches.
    pipe.size = 1
    for _ in range(GROW_AFTER):
        pipe._adapt(False)
    assert pipe.size == 2


async def test_a_corpus_switched_to_another_model_meanwhile_is_written_with_it(
        vectord_url: str, embedd_url: str, http: aiohttp.ClientSession) -> None:
    """A run begun while the corpus held the old numerics' id, its re-embedding switching
    it during the run: the refused batch (409 model_mismatch) is embedded again by the
    corpus's model now and written, and so is every later batch."""
    vc, ec = VectordClient(http, vectord_url), EmbedClient(http, embedd_url)
    name, model = await _corpus(vc, ec)  # the model the corpus switched to
    old = "all-MiniLM-L6-v2"
    docs = [Doc(f"d{i}", f"a note on kelp number {i}") for i in range(5)]
    with pytest.raises(StackFailure, match="holds vectors of model"):
        await Pipeline(vc, ec, name, model=old, batch=2).write(docs)

    async def model_of() -> str | None:
        return str((await vc.get_corpus(name)).model)

    pipe = Pipeline(vc, ec, name, model=old, batch=2, model_of=model_of)
    report = await pipe.write(docs)
    assert report.upserted == 5 and not report.failed and pipe.model == model
    item = await vc.get_item(name, "d3", vector=True)
    want = (await ec.embed([docs[3].text], model=model)).vectors[0]
    assert item.vector is not None
    assert sum(a * b for a, b in zip(item.vector, want, strict=True)) > 0.9999
