"""Documents over HTTP on a real vectord (its task runner, embedded PostgreSQL) and the real
local model: text in, chunked as the wiki sync chunks, embedded by the service; read,
searched and deleted by the id it was given; a task's states, counts and errors; retries
safe; a document's chunks replaced in one transaction; hits carrying the document's id."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from tests.vectord.vdata import call, unique

D = "/v1/corpora/{}/documents"
WORDS = ("harbour pilot ferry lagoon tide anchor rope sail keel mast deck hull cargo crane "
         "lighthouse beacon signal buoy channel dredge").split()


def _essay(words: int, seed: int = 0) -> str:
    """A markdown document of about `words` words in four sections."""
    body = [WORDS[(i * 7 + seed) % len(WORDS)] for i in range(words)]
    quarter = len(body) // 4
    parts = [" ".join(body[i * quarter:(i + 1) * quarter]) for i in range(4)]
    return "# Port manual\n\n" + "\n\n".join(f"## Part {i}\n\n{p}" for i, p in enumerate(parts))


async def _add(http: aiohttp.ClientSession, url: str, corpus: str, docs: list[dict[str, Any]],
               wait: bool = True, **options: Any) -> tuple[int, Any]:
    query = "?wait=true" if wait else ""
    return await call(http, "POST", f"{url}{D.format(corpus)}{query}",
                      {"documents": docs, **options})


async def _ids(http: aiohttp.ClientSession, url: str, corpus: str) -> dict[str, str]:
    status, body = await call(http, "GET", f"{url}/v1/vectors/corpora/{corpus}/ids")
    assert status == 200, body
    return {r["id"]: r["content_hash"] for r in body["items"]}


async def test_a_document_of_1000_words_in_as_text_searched_read_and_deleted_by_its_id(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    corpus = unique("docs")
    text = _essay(1000)
    status, task = await _add(http, documents_url, corpus, [
        {"id": "manual", "title": "Port manual", "text": text, "tags": ["ops"],
         "metadata": {"owner": "harbour"}}])
    assert status == 200 and task["state"] == "succeeded", task
    # A chunk per section (the title's heading, with no text of its own, joins the first).
    assert task["counts"]["added"] == 1 and task["counts"]["chunks"] == 4
    assert task["counts"]["embedded"] == 4 and task["timings"]["total_ms"] > 0

    # Read by the id it was given: its text (its chunks joined), its chunks.
    status, doc = await call(http, "GET", f"{documents_url}{D.format(corpus)}/manual")
    assert status == 200 and doc["chunks"] == [f"manual#{n}" for n in range(4)]
    assert doc["text"].split() == text.split() and doc["metadata"] == {"owner": "harbour"}
    assert doc["tags"] == ["ops"] and doc["language"] == "english"

    # Searchable: hits are its chunks, each carrying the document's id.
    status, found = await call(http, "POST", f"{documents_url}/v1/vectors/corpora/{corpus}/search",
                               {"query_text": "lighthouse beacon", "k": 3})
    assert status == 200 and found["hits"], found
    assert {h["document_id"] for h in found["hits"]} == {"manual"}
    assert all(h["id"].startswith("manual#") for h in found["hits"])

    # The corpus counts documents and chunks, and says the languages as stored.
    status, info = await call(http, "GET", f"{documents_url}/v1/vectors/corpora/{corpus}")
    assert (info["documents"], info["count"]) == (1, 4)
    assert info["language"] == "auto" and info["languages"] == {"english": 4}

    # Deleted by its id: every chunk goes, in one task.
    status, gone = await call(http, "DELETE", f"{documents_url}{D.format(corpus)}/manual?wait=true")
    assert status == 200 and gone["state"] == "succeeded"
    assert (gone["counts"]["deleted"], gone["counts"]["stale"]) == (1, 4)
    assert await _ids(http, documents_url, corpus) == {}
    status, missing = await call(http, "GET", f"{documents_url}{D.format(corpus)}/manual")
    assert status == 404 and missing["error"]["field"] == "id"


async def test_a_task_is_acknowledged_before_it_runs_and_ends_with_its_counts(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    corpus = unique("tasks")
    docs = [{"id": f"page-{i}", "text": _essay(60, i)} for i in range(40)]
    status, first = await _add(http, documents_url, corpus, docs, wait=False)
    assert status == 202 and first["state"] in ("enqueued", "processing"), first
    status, second = await _add(http, documents_url, corpus, docs[:3], wait=False)
    assert status == 202 and second["id"] > first["id"]
    states = set()
    for _ in range(600):  # the tasks of a corpus run in order
        status, now = await call(http, "GET", f"{documents_url}/v1/tasks/{second['id']}")
        states.add(now["state"])
        if now["state"] == "succeeded":
            break
        await asyncio.sleep(0.05)
    assert "enqueued" in states or "processing" in states
    status, done = await call(http, "GET", f"{documents_url}/v1/tasks/{first['id']}")
    assert done["state"] == "succeeded" and done["counts"]["added"] == 40
    assert done["finished_at"] <= now["started_at"]  # the second ran after the first
    # The same batch again (a retry): nothing written, nothing embedded.
    assert (now["counts"]["unchanged"], now["counts"]["embedded"]) == (3, 0)
    status, listed = await call(http, "GET", f"{documents_url}/v1/tasks?corpus={corpus}"
                                             "&state=succeeded&kind=documents_add")
    assert [t["id"] for t in listed["tasks"]] == [second["id"], first["id"]]
    status, page = await call(http, "GET", f"{documents_url}/v1/tasks?corpus={corpus}&limit=1")
    assert len(page["tasks"]) == 1 and page["next"] == first["id"]


async def test_a_document_refused_fails_alone_and_the_task_says_which(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    corpus = unique("refused")
    status, task = await _add(http, documents_url, corpus,
                              [{"id": "a", "text": "# A\n\nfirst part\n\n## B\n\nsecond part"}])
    assert task["state"] == "succeeded"
    # "a#1" is already the second chunk of document "a": a document of that id, stored
    # whole under it, would take its place. It is refused; the other goes in.
    status, task = await _add(http, documents_url, corpus, [
        {"id": "a#1", "text": "another"}, {"id": "c", "text": "a third note"}],
        chunking="none")
    assert status == 200 and task["state"] == "failed", task
    assert task["counts"]["failed"] == 1 and task["counts"]["added"] == 1
    [err] = task["errors"]
    assert err["document_id"] == "a#1" and err["code"] == "id_taken" and "'a'" in err["message"]
    assert set(await _ids(http, documents_url, corpus)) == {"a#0", "a#1", "c"}


async def test_a_documents_chunks_are_replaced_together(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    """Two versions written in turn while a reader lists the corpus: every listing holds
    one version's chunks, never some of each (one transaction per document), and the
    shorter version leaves no stale chunk behind."""
    corpus = unique("swap")
    long = {"id": "doc", "text": "\n\n".join(f"## Long {i}\n\nlong version part {i}"
                                             for i in range(5))}
    short = {"id": "doc", "text": "## Short\n\nshort version\n\n## Also\n\nshort too"}
    await _add(http, documents_url, corpus, [long])
    versions = []
    for v in (long, short):
        await _add(http, documents_url, corpus, [v])
        versions.append(await _ids(http, documents_url, corpus))
    assert set(versions[0]) == {f"doc#{n}" for n in range(5)}
    assert set(versions[1]) == {"doc#0", "doc#1"}
    seen: list[dict[str, str]] = []
    stop = asyncio.Event()

    async def reader() -> None:
        while not stop.is_set():
            seen.append(await _ids(http, documents_url, corpus))

    task = asyncio.create_task(reader())
    for v in (long, short) * 4:
        await _add(http, documents_url, corpus, [v])
    stop.set()
    await task
    assert len(seen) > 4
    assert all(snapshot in versions for snapshot in seen)


async def test_bad_documents_are_a_400_naming_the_field_and_nothing_is_enqueued(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    corpus = unique("bad")
    await _add(http, documents_url, corpus, [{"id": "ok", "text": "fine"}])
    cases = [
        ({"documents": [{"id": "", "text": "x"}]}, "documents[0].id"),
        ({"documents": [{"id": "..", "text": "x"}]}, "documents[0].id"),
        ({"documents": [{"id": "x", "text": "   "}]}, "documents[0].text"),
        ({"documents": [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]}, "documents[1].id"),
        ({"documents": [{"id": "x", "text": "a", "language": "klingon"}]}, "documents[0].language"),
        ({"documents": [{"id": "x", "text": "a", "vector": [0.1] * 384}]}, "documents[0].vector"),
        ({"documents": [{"id": "x", "text": "a", "vector": [0.1] * 3}], "chunking": "none"},
         "documents[0].vector"),
        ({"documents": [{"id": "x", "text": "a"}], "chunk_chars": 10}, "chunk_chars"),
        ({"documents": [{"id": "x", "txt": "a"}]}, "documents[0].txt"),
    ]
    status, before = await call(http, "GET", f"{documents_url}/v1/tasks?corpus={corpus}")
    for body, field in cases:
        status, out = await call(http, "POST", f"{documents_url}{D.format(corpus)}", body)
        assert status == 400 and out["error"]["field"] == field, (body, out)
    status, after = await call(http, "GET", f"{documents_url}/v1/tasks?corpus={corpus}")
    assert after["tasks"] == before["tasks"]
    status, out = await call(http, "GET", f"{documents_url}/v1/tasks/abc")
    assert status == 400 and out["error"]["field"] == "task_id"
    status, out = await call(http, "GET", f"{documents_url}/v1/tasks?state=done")
    assert status == 400 and out["error"]["field"] == "state"


async def test_a_page_id_is_not_an_item_but_its_get_names_its_chunks(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    corpus = unique("pages")
    await _add(http, documents_url, corpus,
               [{"id": "ss.md", "text": "# ss\n\n> Socket stats.\n\n## Listening\n\n`ss -l`"}])
    items = f"{documents_url}/v1/vectors/corpora/{corpus}/items"
    status, out = await call(http, "GET", f"{items}/ss.md")
    assert status == 404 and out["error"]["field"] == "id"
    assert "'ss.md' is a document of 2 chunks: ss.md#0, ss.md#1" in out["error"]["message"]
    # An item's GET has no vector unless asked; DELETE on its own path removes it.
    status, item = await call(http, "GET", f"{items}/ss.md%230")
    assert status == 200 and "vector" not in item and item["metadata"]["parent_id"] == "ss.md"
    status, item = await call(http, "GET", f"{items}/ss.md%230?include=vector")
    assert status == 200 and len(item["vector"]) == 384
    status, out = await call(http, "DELETE", f"{items}/ss.md%231")
    assert status == 200 and out == {"deleted": 1}
    status, out = await call(http, "DELETE", f"{items}/ss.md%231")
    assert status == 404 and out["error"]["field"] == "id"
    # A corpus mistyped: corpus_not_found, with the nearest name.
    status, out = await call(http, "GET", f"{documents_url}{D.format(corpus[:-1])}/ss.md")
    assert status == 404 and out["error"]["code"] == "corpus_not_found"
    assert f"did you mean {corpus!r}" in out["error"]["message"]


async def test_a_new_corpus_is_made_on_the_model_for_its_documents_languages(
        documents_url: str, http: aiohttp.ClientSession) -> None:
    """As the wiki sync chooses a new corpus's model (docs/decisions/0201): German
    documents make a corpus of the multilingual model, English ones keep the default;
    `model` overrides; a corpus on another model than the one asked for is a 409; a bad
    request makes no corpus."""
    from internal.embedd.catalog import E5_ID
    from internal.embedd.local import MODEL_ID as MINILM
    from tests.helpers import FIXTURES

    def pages(folder: str) -> list[dict[str, Any]]:
        files = sorted((FIXTURES / "tldr" / folder).glob("*.md"))[:3]
        return [{"id": f.name, "text": f.read_text(encoding="utf-8")} for f in files]

    async def model_of(corpus: str) -> str | None:
        status, info = await call(http, "GET", f"{documents_url}/v1/vectors/corpora/{corpus}")
        assert status == 200, info
        return info["model"]

    german, english, asked = unique("de"), unique("en"), unique("asked")
    for corpus, docs, options, model in ((german, pages("pages.de/common"), {}, E5_ID),
                                         (english, pages("pages/common"), {}, MINILM),
                                         (asked, pages("pages.de/common"), {"model": MINILM},
                                          MINILM)):
        status, task = await _add(http, documents_url, corpus, docs, **options)
        assert status == 200 and task["state"] == "succeeded", task
        assert await model_of(corpus) == model, corpus

    # A corpus on another model than the one asked for: 409, nothing enqueued.
    status, refused = await _add(http, documents_url, german, pages("pages.de/common"),
                                 model=MINILM)
    assert status == 409 and refused["error"]["code"] == "model_mismatch", refused
    assert "reembed" in refused["error"]["message"]

    # Refused before a corpus is made for it: a model embedd does not serve, a bad document.
    for docs, options, field in (
            (pages("pages/common"), {"model": "no-such-model"}, "model"),
            ([{"id": "a", "text": "x", "language": "klingon"}], {}, "documents[0].language")):
        corpus = unique("none")
        status, refused = await _add(http, documents_url, corpus, docs, **options)
        assert status == 400 and refused["error"]["field"] == field, refused
        status, _ = await call(http, "GET", f"{documents_url}/v1/vectors/corpora/{corpus}")
        assert status == 404
