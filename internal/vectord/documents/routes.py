"""vectord's document and task routes (docs/API.md, "Documents"): documents in as text,
each write a task persisted before its 202; documents read, listed and deleted by the id
their writer gave; tasks read and listed."""

from __future__ import annotations

import asyncio

import msgspec
import structlog
from aiohttp import web

from internal.api import validate
from internal.api.vectord import Corpus
from internal.clients.embed import EmbedClient
from internal.common import access, language
from internal.common.auth import caller
from internal.common.errors import Conflict, InvalidArgument, LakehouseError, NotFound
from internal.common.web import json_response, read_json, route
from internal.ingest.documents import blank, documents_languages
from internal.vectord.appkeys import STORE
from internal.vectord.corpora import after_write, int_param, name_of
from internal.vectord.documents.runner import RUNNER
from lakehouse.wire.documents import (
    MAX_DOCUMENT_ID_BYTES,
    TASK_KINDS,
    TASK_STATES,
    AddDocuments,
    DeleteDocuments,
    DocumentIn,
    DocumentsPage,
    Task,
    TaskList,
)
from lakehouse.wire.models import model_for

log = structlog.get_logger()

DOCUMENTS = "/v1/corpora/{name}/documents"
TASKS = "/v1/tasks"
WAIT_SECONDS = 50.0  # `?wait=true` waits this long at most (under the gateway's 60 s)
MAX_TASKS_PAGE = 1000


def _waits(request: web.Request) -> bool:
    raw = request.query.get("wait", "").strip().lower()
    if raw in ("", "false", "0", "no"):
        return False
    if raw in ("true", "1", "yes"):
        return True
    raise InvalidArgument(f"wait: expected true or false, got {raw[:40]!r}", field="wait")


async def _answer(request: web.Request, task: Task, waits: bool) -> web.Response:
    """202 with the task; with `?wait=true` (read before the task is made: a bad one
    enqueues nothing), 200 once it ended (202 when it has not within WAIT_SECONDS: wait
    again on GET /v1/tasks/{id}?wait=true)."""
    if waits:
        task = await request.app[RUNNER].wait(task, WAIT_SECONDS)
    return await after_write(request, json_response(task, status=200 if task.done else 202))


def _check(doc: DocumentIn, i: int, req: AddDocuments, corpus: Corpus | None) -> DocumentIn:
    """One document's checks a decode cannot make (its vector's against the corpus when
    one is given); its language as a regconfig."""
    base = f"documents[{i}]"
    validate.item_id(doc.id, f"{base}.id")
    if len(doc.id.encode("utf-8")) > MAX_DOCUMENT_ID_BYTES:
        raise InvalidArgument(f"{base}.id: longer than {MAX_DOCUMENT_ID_BYTES} bytes of UTF-8 "
                              "(its chunks' ids add '#<n>')", field=f"{base}.id")
    if doc.id in validate.UNREADABLE_IDS:
        raise InvalidArgument(f"{base}.id: {doc.id!r} cannot be read back (in a URL it means "
                              "a folder step); any other id can", field=f"{base}.id")
    if blank(doc):
        raise InvalidArgument(f"{base}.text: nothing to store (no text, no title)",
                              field=f"{base}.text")
    lang = doc.language
    if lang is not None and lang.strip() and lang.strip().lower() != language.AUTO:
        lang = language.normalize_language(lang, f"{base}.language")
    if doc.vector is not None:
        if req.chunking != "none" or doc.chunks is not None:
            raise InvalidArgument(f"{base}.vector: a document's own vector needs chunking "
                                  "`none` (the service cannot know which chunks it is for)",
                                  field=f"{base}.vector")
        if corpus is not None:
            validate.vector(doc.vector, corpus.dim, corpus.metric, f"{base}.vector",
                            corpus.precision)
    return msgspec.structs.replace(doc, language=lang)


def _checked(req: AddDocuments, corpus: Corpus | None) -> AddDocuments:
    """The request with every document checked (400 naming the first fault, nothing
    enqueued; None: all but the vectors' fit to the corpus, before one is made), an id
    given twice refused."""
    seen: dict[str, int] = {}
    docs = []
    for i, doc in enumerate(req.documents):
        if doc.id in seen:
            raise InvalidArgument(f"documents[{i}].id: {doc.id!r} is given twice (also "
                                  f"documents[{seen[doc.id]}])", field=f"documents[{i}].id")
        seen[doc.id] = i
        docs.append(_check(doc, i, req, corpus))
    return msgspec.structs.replace(req, documents=docs)


async def _corpus_for_documents(request: web.Request, name: str, body: AddDocuments) -> Corpus:
    """The corpus written to; a missing one is made for documents (language auto; the
    model asked for, else the one embedd lists for the documents' languages) when the
    caller may create corpora, else the 404 it is. A corpus on another model than the
    one asked for: 409 `model_mismatch`."""
    store = request.app[STORE]
    try:
        corpus = await store.corpus(name, fresh=True)
    except NotFound:
        scope = caller()
        if scope is not None and not scope.admin:
            # A name the key covers: say what creating it takes (one outside it stays a 404).
            access.decide(scope, "admin", doing="adding documents to a corpus that does not "
                                                "exist (it creates the corpus)")
        embed = request.app[RUNNER].embed
        if embed is None:
            raise
        model, dim = await _new_model(embed, body)
        for i, doc in enumerate(body.documents):  # refused before the corpus is made
            if doc.vector is not None:
                validate.vector(doc.vector, dim, "cosine", f"documents[{i}].vector",
                                store.cfg.precision)
        try:
            corpus = await store.create_corpus(name, dim, "cosine", language.AUTO, model, False,
                                               store.cfg.precision)
            log.info("corpus_created", corpus=name, dim=dim, model=model, by="documents")
        except Conflict:
            corpus = await store.corpus(name, fresh=True)
    if body.model and corpus.model != body.model:
        raise Conflict(f"corpus {name!r} is on model {corpus.model!r}, not {body.model!r}; "
                       f"move it with a re-embedding (`lakehouse reembed {name} --model "
                       f"{body.model}`)", code="model_mismatch")
    return corpus


async def _new_model(embed: EmbedClient, body: AddDocuments) -> tuple[str, int]:
    """The model of a corpus the documents create, and its dimension: the one asked for,
    else the one for their languages (the default when it declares them)."""
    listing = await embed.models()
    served = {m.id: m.dim for m in listing.models}
    if body.model is not None and body.model not in served:
        raise InvalidArgument(f"model: embedd does not serve {body.model!r} (it serves "
                              f"{', '.join(sorted(served))})", field="model")
    model = body.model or model_for(
        listing, await asyncio.to_thread(documents_languages, body.documents))
    dim = served.get(model)
    if not dim:  # a remote model's dimension is known after its first answer
        probe = await embed.embed(["dimension probe"], model=model)
        model, dim = probe.model, probe.dim
    return model, dim


async def add_documents(request: web.Request) -> web.Response:
    name = name_of(request)
    waits = _waits(request)
    body = await read_json(request, AddDocuments)
    store = request.app[STORE]
    req = _checked(body, None)  # a bad document refused before a corpus is made for it
    corpus = await _corpus_for_documents(request, name, req)
    req = _checked(req, corpus)
    await _fits_model(request, corpus, req)
    scope = caller()
    task = await store.enqueue(corpus, "documents_add", msgspec.json.encode(req),
                               len(req.documents), scope.key_id if scope else None)
    request.app[RUNNER].wake.set()
    return await _answer(request, task, waits)


async def _fits_model(request: web.Request, corpus: Corpus, req: AddDocuments) -> None:
    """Documents the service embeds need a corpus of a model embedd serves, or one of no
    model with the embedder's dimension: a 409 now, not a failed task later. (embedd
    not answering: the task waits for it, and says so then.)"""
    embed = request.app[RUNNER].embed
    if embed is None or all(d.vector is not None for d in req.documents):
        return
    try:
        listing = await embed.models()
        model, dim = (corpus.model, corpus.dim) if corpus.model else await embed.default_model()
    except LakehouseError:
        return
    served = sorted(m.id for m in listing.models)
    if corpus.model and corpus.model not in served:
        raise Conflict(f"corpus {corpus.name!r} holds vectors of model {corpus.model!r}, which "
                       f"embedd does not serve (it serves {', '.join(served)})",
                       code="model_mismatch")
    if dim != corpus.dim:
        raise Conflict(f"corpus {corpus.name!r} holds {corpus.dim}-dimensional vectors of no "
                       f"model; the embedder's model {model!r} makes {dim}: write documents "
                       "to a corpus made for them", code="model_mismatch")


async def delete_document(request: web.Request) -> web.Response:
    return await _delete(request, [request.match_info["id"]])


async def delete_documents(request: web.Request) -> web.Response:
    body = await read_json(request, DeleteDocuments)
    return await _delete(request, body.ids, "ids")


async def _delete(request: web.Request, ids: list[str], field: str = "id") -> web.Response:
    waits = _waits(request)
    for i, doc_id in enumerate(ids):
        validate.item_id(doc_id, f"{field}[{i}]" if field == "ids" else field)
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request), fresh=True)
    scope = caller()
    task = await store.enqueue(corpus, "documents_delete",
                               msgspec.json.encode(DeleteDocuments(ids=ids)), len(ids),
                               scope.key_id if scope else None)
    request.app[RUNNER].wake.set()
    return await _answer(request, task, waits)


async def get_document(request: web.Request) -> web.Response:
    doc_id = validate.item_id(request.match_info["id"], "id")
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request))
    return json_response(await store.get_document(corpus, doc_id))


async def list_documents(request: web.Request) -> web.Response:
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request))
    limit = int_param(request, "limit", 1000, 1, 10_000)
    rows = await store.list_documents(corpus, request.query.get("prefix", ""),
                                      request.query.get("after", ""), limit)
    return json_response(DocumentsPage(documents=rows,
                                       next_after=rows[-1].id if len(rows) == limit else None))


def _task_id(raw: str, field: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise InvalidArgument(f"{field}: expected a task id (a positive integer), got "
                              f"{raw[:40]!r}", field=field)
    return int(raw)


async def get_task(request: web.Request) -> web.Response:
    task_id = _task_id(request.match_info["task_id"], "task_id")
    task = await request.app[STORE].task(task_id)
    scope = caller()
    if task is None or (scope is not None and not scope.sees(task.corpus)):
        raise NotFound(f"task {task_id} not found", field="task_id")
    if _waits(request):
        task = await request.app[RUNNER].wait(task, WAIT_SECONDS)
    return json_response(task)


def _listed(request: web.Request, key: str, allowed: tuple[str, ...]) -> list[str]:
    values = [v.strip() for v in request.query.get(key, "").split(",") if v.strip()]
    for v in values:
        if v not in allowed:
            raise InvalidArgument(f"{key}: {v!r} is not one of {', '.join(allowed)}", field=key)
    return values


async def list_tasks(request: web.Request) -> web.Response:
    """Newest first, filtered by corpus, state and kind; the caller's corpora only."""
    store = request.app[STORE]
    states = _listed(request, "state", TASK_STATES)
    kinds = _listed(request, "kind", TASK_KINDS)
    limit = int_param(request, "limit", 20, 1, MAX_TASKS_PAGE)
    raw_from = request.query.get("from", "")
    before = _task_id(raw_from, "from") if raw_from else None
    named = [validate.corpus_name(c, "corpus") for c in
             (v.strip() for v in request.query.get("corpus", "").split(",")) if c]
    scope = caller()
    corpora: list[str] | None = named or None
    if scope is not None and not scope.all_corpora:
        corpora = access.visible(scope, named or await store.corpus_names())
    tasks = await store.tasks(corpora=corpora, states=states, kinds=kinds, before=before,
                              limit=limit + 1)
    more = len(tasks) > limit
    return json_response(TaskList(tasks=tasks[:limit], next=tasks[limit].id if more else None))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post(route(DOCUMENTS), add_documents)
    r.add_get(route(DOCUMENTS), list_documents)
    r.add_post(route(DOCUMENTS + "/delete"), delete_documents)
    r.add_get(route(DOCUMENTS + "/{id}"), get_document)
    r.add_delete(route(DOCUMENTS + "/{id}"), delete_document)
    r.add_get(TASKS, list_tasks)
    r.add_get(route(TASKS + "/{task_id}"), get_task)
