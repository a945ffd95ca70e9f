"""vectord's corpus routes: create, list, describe (and change the description), delete,
build the index, re-embed, convert to another precision, the profile, and what the
corpora take (GET /v1/vectors/storage)."""

from __future__ import annotations

import contextlib

import structlog
from aiohttp import web

from internal.api import validate
from internal.api.responses import CorpusDeleted, CorpusList, CorpusProfile
from internal.api.vectord import (
    ConvertRequest,
    CreateCorpus,
    IndexSettingsRequest,
    ReembedRequest,
    UpdateCorpus,
)
from internal.common import access, language
from internal.common.auth import caller
from internal.common.errors import Forbidden, NotFound
from internal.common.lsn import LSN_HEADER
from internal.common.web import json_response, read_json, route
from internal.vectord.appkeys import REEMBED, STORE, WARMER
from internal.vectord.search import selection
from internal.vectord.storage import convert, profiles, reindex, sizes
from internal.vectord.storage.store import Written

log = structlog.get_logger()

PREFIX = "/v1/vectors/corpora"
STORAGE = "/v1/vectors/storage"


def name_of(request: web.Request) -> str:
    return validate.corpus_name(request.match_info["name"])


async def create_corpus(request: web.Request) -> web.Response:
    body = await read_json(request, CreateCorpus)
    validate.corpus_name(body.name)
    validate.dim(body.dim)
    lang = language.normalize_corpus_language(body.language, "language")
    model = body.model.strip() if body.model else None
    description = validate.description(body.description)
    store = request.app[STORE]
    settings = reindex.merged(store.index_defaults(), body.index or IndexSettingsRequest(),
                              "index.ef_construction")
    corpus = await store.create_corpus(
        body.name, body.dim, body.metric, lang, model or None, body.defer_index,
        body.precision or store.cfg.precision, settings, description)
    log.info("corpus_created", corpus=corpus.name, dim=corpus.dim, metric=corpus.metric,
             precision=corpus.precision)
    return await after_write(request, json_response(
        corpus.public(0, index=store.index_settings(corpus)), status=201))


async def list_corpora(request: web.Request) -> web.Response:
    scope = caller()
    rows = await request.app[STORE].list_corpora()
    return json_response(CorpusList(
        corpora=[r for r in rows if scope is None or scope.sees(r.name)]))


async def get_corpus(request: web.Request) -> web.Response:
    return json_response(await request.app[STORE].describe(name_of(request)))


async def update_corpus(request: web.Request) -> web.Response:
    """PATCH: a new description (null or "" clears it); the profile follows it."""
    body = await read_json(request, UpdateCorpus)
    described = await request.app[STORE].describe_as(name_of(request),
                                                     validate.description(body.description))
    return await after_write(request, json_response(described))


async def corpus_profile(request: web.Request) -> web.Response:
    """What the corpus is about, against the other corpora the caller may see (never a
    tenant token: a profile is built over every tenant's items)."""
    scope = caller()
    if scope is not None and scope.filter is not None:
        raise Forbidden("reading a corpus's profile: a tenant token sees none (a profile is "
                        "built over every tenant's items)", code="forbidden")
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request), fresh=True)
    names = [n for n in access.visible(scope, await store.corpus_names()) if n != corpus.name]
    others = []
    for n in names:
        with contextlib.suppress(NotFound):  # deleted meanwhile
            if (p := store.profiles.get((await store.corpus(n)).id)) is not None:
                others.append(p)
    own = store.profiles.get(corpus.id)
    async with store.pool.connection() as conn:
        version = await profiles.version_of(conn, corpus.id)
    if own is None:
        return json_response(CorpusProfile(corpus=corpus.name, description=corpus.description,
                                           current=False))
    return json_response(CorpusProfile(
        corpus=corpus.name, description=corpus.description,
        current=own.version == version and own.about == profiles.about(
            corpus.name, corpus.description),
        documents=own.documents, sampled=own.sampled, lexemes=len(own.terms),
        distinctive=selection.distinctive(own, others), version=own.version,
        built_at=own.built_at, build_ms=own.build_ms))


async def delete_corpus(request: web.Request) -> web.Response:
    name = name_of(request)
    await request.app[STORE].delete_corpus(name)
    log.info("corpus_deleted", corpus=name)
    return await after_write(request, json_response(CorpusDeleted(deleted=name)))


async def reembed(request: web.Request) -> web.Response:
    """Move the corpus to another model in the background: 202 with the progress."""
    body = await read_json(request, ReembedRequest)
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request), fresh=True)
    started = await request.app[REEMBED].start(corpus, body.model)
    return await after_write(request, json_response(started, status=202))


async def convert_corpus(request: web.Request) -> web.Response:
    """Move the corpus's vectors to another precision in the background: 202 with the
    progress (storage/convert.py)."""
    body = await read_json(request, ConvertRequest)
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request), fresh=True)
    started = await convert.start(store, corpus, body.precision)
    request.app[REEMBED].wake.set()  # the jobs' runner takes it
    return await after_write(request, json_response(started, status=202))


async def index_settings(request: web.Request) -> web.Response:
    """Change the corpus's vector index settings: 200 when they apply at once, 202 when
    its graph is rebuilt in the background (storage/reindex.py)."""
    body = await read_json(request, IndexSettingsRequest)
    store = request.app[STORE]
    corpus = await store.corpus(name_of(request), fresh=True)
    changed = await store.change_index(corpus, body)
    if changed.reindex is not None:
        request.app[REEMBED].wake.set()  # the jobs' runner takes it
    return await after_write(request, json_response(
        changed, status=202 if changed.reindex is not None else 200))


async def build_index(request: web.Request) -> web.Response:
    out = await request.app[STORE].build_index(name_of(request))
    return await after_write(request, json_response(out))


async def storage(request: web.Request) -> web.Response:
    """The corpora's sizes (those the caller sees), the server's memory settings, the
    memory held, the warm-up's state."""
    store = request.app[STORE]
    scope = caller()
    visible = None if scope is None or scope.all_corpora else access.visible(
        scope, await store.corpus_names())
    return json_response(await sizes.storage(store, visible, request.app[WARMER].status()))


def written(resp: web.Response, done: Written) -> web.Response:
    """A write's answer carries the WAL position after its commit (read-your-writes)."""
    if done.lsn:
        resp.headers[LSN_HEADER] = done.lsn
    return resp


async def after_write(request: web.Request, resp: web.Response) -> web.Response:
    """A committed change of the catalog answers with the WAL position after it, as item
    writes do (read on the primary after the commit: at or past it)."""
    return written(resp, Written(0, await request.app[STORE].wal_position()))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post(PREFIX, create_corpus)
    r.add_get(PREFIX, list_corpora)
    r.add_get(route(PREFIX + "/{name}"), get_corpus)
    r.add_patch(route(PREFIX + "/{name}"), update_corpus)
    r.add_get(route(PREFIX + "/{name}/profile"), corpus_profile)
    r.add_delete(route(PREFIX + "/{name}"), delete_corpus)
    r.add_post(route(PREFIX + "/{name}/index"), build_index)
    r.add_post(route(PREFIX + "/{name}/index/settings"), index_settings)
    r.add_post(route(PREFIX + "/{name}/reembed"), reembed)
    r.add_post(route(PREFIX + "/{name}/convert"), convert_corpus)
    r.add_get(STORAGE, storage)
