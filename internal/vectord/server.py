"""vectord: corpora of vectors and text on PostgreSQL + pgvector, over HTTP (docs/API.md)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
import msgspec
import structlog
from aiohttp import web

from internal.api import validate
from internal.api.responses import (
    IdRow,
    IdsPage,
    ItemsDeleted,
    StoredItem,
    Upserted,
)
from internal.api.vectord import (
    MAX_IDS_PAGE,
    Corpus,
    CorpusSearchResult,
    DeleteItems,
    MultiSearchRequest,
    MultiSearchResponse,
    SearchError,
    SearchRequest,
    SearchResponse,
    Space,
    SpacesResponse,
    UpsertRequest,
)
from internal.clients.embed import EmbedClient, make_client
from internal.common import access, language, malloc, waits
from internal.common.auth import caller, protect, service_headers
from internal.common.daemon import serve
from internal.common.errors import InvalidArgument, LakehouseError, NotFound, PayloadTooLarge
from internal.common.lsn import REQUEST_LSN, parse_lsn
from internal.common.web import json_response, make_base_app, read_json, route
from internal.config import Config
from internal.ha.follow import LeaderWatch
from internal.pg import embedded
from internal.pg.replicas import ReplicaRouter
from internal.pg.resilient import ResilientPool
from internal.vectord import corpora, model_languages
from internal.vectord.appkeys import CFG, JUDGE, LEADER, REEMBED, WARMER
from internal.vectord.appkeys import STORE as STORE  # bench/suite/scaling.py reads it here
from internal.vectord.corpora import int_param, name_of, written
from internal.vectord.documents import routes as documents
from internal.vectord.documents.runner import RUNNER, Runner
from internal.vectord.judging import Judge
from internal.vectord.keys import routes
from internal.vectord.search import engine, scoped, selection, validation
from internal.vectord.shaping import shaped
from internal.vectord.storage import ranker_routes, schema
from internal.vectord.storage.reembed import Reembedder
from internal.vectord.storage.store import PreparedItem, Store, Written
from internal.vectord.storage.warm import Warmer

log = structlog.get_logger()

PREFIX = corpora.PREFIX
MULTI_SEARCH = "/v1/vectors/search"
SPACES = "/v1/vectors/spaces"
MAX_SEARCH_CORPORA = 1000

SPACE_MAINTENANCE_SECONDS = 1.0


async def _every(round_: Callable[[], Awaitable[object]], due: asyncio.Event, seconds: float,
                 failed: str) -> None:
    """round_ in the background, whenever `due` is set and at least every `seconds`; a
    round's failure is reported (as `failed`) and the next round retries."""
    while True:
        try:
            await round_()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported, retried on the next round
            log.warning(failed, error=str(exc))
        await waits.event(due, seconds)
        due.clear()


async def _space_round(store: Store) -> None:
    """Attach corpora not in their embedding space yet (a data directory from before
    spaces is migrated this way, resumably), move written vectors into the shared graphs,
    reclaim what deleted corpora left there: whenever a write or a delete asks, and every
    second (for writes through another vectord)."""
    await store.attach_pending()
    await store.apply_pending()
    await store.reclaim()


PROFILE_SECONDS = 2.0


def _maintain_spaces(store: Store) -> Coroutine[Any, Any, None]:
    return _every(lambda: _space_round(store), store.spaces_changed,
                  SPACE_MAINTENANCE_SECONDS, "space_maintenance_failed")


def _maintain_profiles(store: Store, embed: EmbedClient | None) -> Coroutine[Any, Any, None]:
    """Build the profiles of the corpora written to, deleted from or described anew since
    (storage/profiles.py, bounded per corpus; the name and description embedded through
    embedd's bulk lane), and load those any vectord built: every two seconds, or at once
    for a new description."""
    return _every(lambda: store.profiles.upkeep(store.pool, embed), store.profiles_due,
                  PROFILE_SECONDS, "profile_upkeep_failed")


async def _database(app: web.Application) -> AsyncIterator[None]:
    """Embedded PostgreSQL (when no DSN), migrations, then the pool; undone in reverse."""
    cfg = app[CFG].vectord
    server: embedded.EmbeddedPostgres | None = None
    dsn = cfg.dsn
    if not dsn:
        server = await asyncio.to_thread(functools.partial(
            embedded.start, cfg.data_dir, wal_dir=app[CFG].backup.wal_dir))
        dsn = server.dsn
    try:
        db = await schema.migrate(dsn)
        pool = ResilientPool(dsn, cfg.pool_min, cfg.pool_max, timeout=cfg.pool_timeout)
        await pool.open(timeout=30.0)
        router: ReplicaRouter | None = None
        watch: LeaderWatch | None = None
        try:
            if app[CFG].ha.patroni_urls:  # writes follow the Patroni leader
                watch = app[LEADER] = LeaderWatch(pool, app[CFG].ha.patroni_urls,
                                                  interval=app[CFG].ha.watch_interval)
                await watch.start()
            store = app[STORE] = Store(pool, cfg, db)
            if cfg.read_dsns:
                router = ReplicaRouter(pool, cfg.read_dsns, max_lag=cfg.max_replica_lag,
                                       wait=cfg.replica_wait, pool_max=cfg.pool_max)
                await router.open()
                store.reads = store.replicas = router
            log.info("vectord_ready", vector=db.vector_version, trgm=db.trgm,
                     schema_version=db.version, read_replicas=len(cfg.read_dsns))
            # Re-embedding calls embedd as a service of the stack (its token when auth is on).
            async with aiohttp.ClientSession(headers=service_headers(app[CFG])) as session:
                embed = make_client(session, app[CFG].vectord.embedd_url)
                reembedder = app[REEMBED] = Reembedder(store, embed)
                runner = app[RUNNER] = Runner(store, embed, app[JUDGE])
                warmer = app[WARMER] = Warmer(store, cfg)
                changes = (lambda: watch.changes) if watch is not None else None
                tasks = [asyncio.create_task(_maintain_spaces(store)),
                         asyncio.create_task(_maintain_profiles(store, reembedder.embed)),
                         asyncio.create_task(reembedder.run_forever()),
                         asyncio.create_task(warmer.run_forever(changes)),
                         asyncio.create_task(model_languages.follow(store, embed))]
                if cfg.tasks:
                    tasks.append(asyncio.create_task(runner.run_forever()))
                try:
                    yield
                finally:
                    for task in tasks:
                        task.cancel()
                    for task in tasks:
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
                    await store.lex.close()
        finally:
            if watch is not None:
                await watch.close()
            if router is not None:
                await router.close()
            await pool.close()
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


# --- items -------------------------------------------------------------------

def _prepare(corpus: Corpus, body: UpsertRequest, held: dict[str, int] | None,
             judged: dict[int, language.Verdict]) -> list[PreparedItem]:
    """Validate every item (naming index and field) before anything is written.

    held: items per language already in the corpus; with this batch's verdicts (judged:
    by item index, every item whose language is detected) it gives the prior
    (language.dominant) that a detected item takes unless its own verdict is confident
    (language.settle), in an `auto` corpus; in a fixed one, the corpus's.
    """
    arrays = []
    told: list[str | None] = []
    counts = dict(held or {})
    for i, it in enumerate(body.items):
        arrays.append(validate.item(it, i, corpus.dim, corpus.metric, corpus.precision))
        fixed = language.fixed_language(it.language, corpus.language, f"items[{i}].language")
        told.append(fixed)
        if fixed is None and (v := judged[i]).language is not None:
            counts[v.language] = counts.get(v.language, 0) + 1
    fallback = corpus.language if corpus.language != language.AUTO else (
        language.dominant(counts) if judged else None)
    langs = [t if t is not None else language.settle(judged[i], fallback)
             for i, t in enumerate(told)]
    return [PreparedItem.of(it, arr, lang)
            for it, arr, lang in zip(body.items, arrays, langs, strict=True)]


async def upsert_items(request: web.Request) -> web.Response:
    store = request.app[STORE]
    name = name_of(request)
    body = await read_json(request, UpsertRequest)
    limit = store.cfg.max_batch
    if len(body.items) > limit:
        raise PayloadTooLarge(f"items: {len(body.items)} items; at most {limit} per call",
                              field="items")
    model = body.model.strip() if body.model else None

    async def run_upsert(corpus: Corpus) -> Written:
        detected = [i for i, it in enumerate(body.items)
                    if language.detects(it.language, corpus.language)]
        held = await store.language_counts(corpus) if detected else None
        # lingua's verdicts from the judging process (internal/vectord/judging.py).
        verdicts = await request.app[JUDGE].verdicts([body.items[i].text for i in detected])
        prepared = await asyncio.to_thread(_prepare, corpus, body, held,
                                           dict(zip(detected, verdicts, strict=True)))
        return await store.upsert(corpus, prepared, model or None)

    done = await store.with_corpus(name, run_upsert)
    return written(json_response(Upserted(upserted=done.count)), done)


async def get_item(request: web.Request) -> web.Response:
    """One item; its vector only with `?include=vector`; an id that is a document's
    answers 404 naming its chunks."""
    store = request.app[STORE]
    item_id = request.match_info["id"]
    vector = _include(request) == {"vector"}

    async def run_get(corpus: Corpus) -> StoredItem:
        try:
            return await store.get_item(corpus, item_id, vector=vector)
        except NotFound as exc:
            hint = await store.document_hint(corpus, item_id)
            if not hint:
                raise
            raise NotFound(exc.message + hint, field="id") from None

    return json_response(await store.with_corpus(name_of(request), run_get))


def _include(request: web.Request) -> set[str]:
    """`?include=vector`: what an item's GET adds (nothing else may be asked)."""
    asked = {v.strip() for v in request.query.get("include", "").split(",") if v.strip()}
    for what in asked - {"vector"}:
        raise InvalidArgument(f"include: {what[:40]!r} is not one of: vector", field="include")
    return asked


async def delete_item(request: web.Request) -> web.Response:
    """DELETE on an item's own path: 404 naming `id` when there is none."""
    store = request.app[STORE]
    item_id = validate.item_id(request.match_info["id"], "id")

    async def run_delete(corpus: Corpus) -> Written:
        done = await store.delete_items(corpus, [item_id])
        if not done.count:
            raise NotFound(f"item {item_id!r} not found in corpus {corpus.name!r}"
                           + await store.document_hint(corpus, item_id), field="id")
        return done

    done = await store.with_corpus(name_of(request), run_delete)
    return written(json_response(ItemsDeleted(deleted=done.count)), done)


async def delete_items(request: web.Request) -> web.Response:
    store = request.app[STORE]
    name = name_of(request)
    body = await read_json(request, DeleteItems)
    if len(body.ids) > MAX_IDS_PAGE:
        raise PayloadTooLarge(f"ids: at most {MAX_IDS_PAGE} per call", field="ids")
    for i, item_id in enumerate(body.ids):
        validate.item_id(item_id, f"ids[{i}]")

    async def run_delete(corpus: Corpus) -> Written:
        return await store.delete_items(corpus, body.ids)

    done = await store.with_corpus(name, run_delete)
    return written(json_response(ItemsDeleted(deleted=done.count)), done)


async def list_ids(request: web.Request) -> web.Response:
    store = request.app[STORE]
    name = name_of(request)
    prefix = request.query.get("prefix", "")
    after = request.query.get("after", "")
    limit = int_param(request, "limit", 1000, 1, MAX_IDS_PAGE)

    async def run_list(corpus: Corpus) -> list[IdRow]:
        return await store.list_ids(corpus, prefix, after, limit)

    rows = await store.with_corpus(name, run_list)
    next_after = rows[-1].id if len(rows) == limit else None
    return json_response(IdsPage(items=rows, next_after=next_after))


# --- search ------------------------------------------------------------------

def _request_lsn(request: web.Request) -> int | None:
    """The Lakehouse-LSN a search carries (a write's position it must see; checked by the
    middleware, which answers 400 naming the header when it is not a WAL position)."""
    raw = REQUEST_LSN.get()
    return None if raw is None else parse_lsn(raw)


async def search(request: web.Request) -> web.Response:
    """One corpus: a federation of one (the same path as the multi-corpus route)."""
    started = time.perf_counter()
    store = request.app[STORE]
    name = name_of(request)
    req = scoped.request(await read_json(request, SearchRequest))
    p, plan = validation.check(store, req), shaped.check(req)  # before any corpus is touched
    lsn = _request_lsn(request)
    answer = await store.read_search(lambda: shaped.search(store, [name], p, plan), lsn)
    result = answer.result
    if result.outcomes[0].error is not None:
        raise result.outcomes[0].error
    took = round((time.perf_counter() - started) * 1000, 3)
    return json_response(SearchResponse(corpus=name, mode=p.mode.name, hits=result.hits,
                                        took_ms=took, facets=answer.facets,
                                        did_you_mean=p.notes.did_you_mean or msgspec.UNSET))


def _corpus_result(o: engine.Outcome) -> CorpusSearchResult:
    """A corpus of a multi-search: its share of the hits, or its error as the per-corpus
    route would have answered it."""
    exc = o.error
    if exc is None:
        return CorpusSearchResult(
            corpus=o.name, hits=o.hits, took_ms=o.took_ms,
            skipped=o.skipped if o.skipped is not None else msgspec.UNSET,
            selection=selection.public(o.selection) if o.selection is not None
            else msgspec.UNSET)
    if isinstance(exc, LakehouseError) and not (exc.status >= 500 and exc.code == "internal"):
        return CorpusSearchResult(corpus=o.name, status=exc.status,
                                  error=SearchError(exc.code, exc.message, exc.field))
    if isinstance(exc, LakehouseError):
        log.error("search_failed", corpus=o.name, error=exc.message)
    else:
        log.error("search_crashed", corpus=o.name, exc_info=exc)
    return CorpusSearchResult(corpus=o.name, status=500,
                              error=SearchError("internal", "internal error"))


async def spaces(request: web.Request) -> web.Response:
    """Every corpus by embedding space (model label, dimension): what a caller embeds a
    query with before a search over them (matrixd does)."""
    groups: dict[tuple[str | None, int], list[str]] = {}
    scope = caller()
    for name, dim, model in await request.app[STORE].registry():
        if scope is not None and not scope.sees(name):
            continue
        groups.setdefault((model, dim), []).append(name)
    return json_response(SpacesResponse(spaces=[
        Space(model=model, dim=dim, corpora=names)
        for (model, dim), names in sorted(groups.items(), key=lambda g: (g[0][0] or "", g[0][1]))]))


async def _searched(store: Store, req: MultiSearchRequest) -> list[str]:
    """The corpora a multi-search covers: those named, else every corpus but the excluded."""
    if req.corpora is None:
        excluded = set(req.exclude_corpora)
        return access.visible(caller(), (n for n in await store.corpus_names()
                                         if n not in excluded))
    return list(req.corpora)


def _federation(req: MultiSearchRequest, names: list[str],
                weights: dict[str, float] | None) -> engine.Federation:
    """The corpus weights (each a searched corpus's; checked when the corpora were named),
    the `include` items of the searched corpora, checked, and whether resource selection
    weighs the others: asked, and not under a tenant's forced filter (a profile is built
    over every tenant's items)."""
    if weights is None:
        weights = validate.corpus_weights(req.corpus_weights or {}, names)
    for i, ref in enumerate(req.include):
        validate.item_id(ref.id, f"include[{i}].id")
    searched = set(names)
    scope = caller()
    return engine.federation(weights, [(r.corpus, r.id, r.factor) for r in req.include
                                       if r.corpus in searched],
                             select=req.corpus_selection and (scope is None or scope.filter is None))


async def multi_search(request: web.Request) -> web.Response:
    """One search over several corpora, ranked as their union (internal.vectord.search.engine)."""
    started = time.perf_counter()
    store = request.app[STORE]
    req = scoped.request(await read_json(request, MultiSearchRequest))
    validate.corpora(req.corpora, MAX_SEARCH_CORPORA)
    weights = (None if req.corpora is None  # checked once the corpora are known
               else validate.corpus_weights(req.corpus_weights or {}, req.corpora))
    p, plan = validation.check(store, req), shaped.check(req)  # before any corpus is touched
    names = await _searched(store, req)
    fed = _federation(req, names, weights)
    lsn = _request_lsn(request)
    answer = await store.read_search(lambda: shaped.search(store, names, p, plan, fed), lsn)
    result = answer.result
    took = round((time.perf_counter() - started) * 1000, 3)
    outside = sum(1 for r in req.include if r.corpus not in fed.include)  # no searched corpus's
    return json_response(MultiSearchResponse(
        mode=p.mode.name, hits=result.hits,
        results=[_corpus_result(o) for o in result.outcomes], took_ms=took,
        include_missing=result.include_missing + outside, facets=answer.facets,
        query_stats=(p.ranker.stats if p.ranker is not None and p.ranker.stats is not None
                     else msgspec.UNSET),
        did_you_mean=p.notes.did_you_mean or msgspec.UNSET))


async def readyz(request: web.Request) -> web.Response:
    store = request.app.get(STORE)
    if store is None:
        return json_response({"status": "degraded",
                              "components": {"postgres": {"status": "starting"}}}, status=503)
    try:
        pg = await store.ping()
    except Exception as exc:  # readiness reports any failure, it never raises
        log.warning("readyz_postgres_failed", error=str(exc))
        return json_response({"status": "degraded", "components": {
            "postgres": {"status": "error", "error": type(exc).__name__}}}, status=503)
    components: dict[str, Any] = {
        "postgres": pg, "lexical_index": store.lex.status(store.cfg.lexical_engine)}
    if WARMER in request.app:
        components["warmup"] = request.app[WARMER].status()
    if store.replicas is not None:
        components["read_replicas"] = store.replicas.status()
    if LEADER in request.app:
        components["ha"] = request.app[LEADER].status()
    return json_response({"status": "ok", "components": components})


def make_app(cfg: Config) -> web.Application:
    """vectord's application; the database is opened in a cleanup_ctx."""
    app = make_base_app()
    protect(app, cfg)
    app[CFG] = cfg
    app[JUDGE] = Judge(cfg.vectord.write_nice, worker=cfg.vectord.language_worker)
    app.cleanup_ctx.append(_database)
    r = app.router
    r.add_get("/readyz", readyz)
    corpora.add_routes(app)
    r.add_post(route(PREFIX + "/{name}/items"), upsert_items)
    r.add_post(route(PREFIX + "/{name}/items/delete"), delete_items)
    r.add_get(route(PREFIX + "/{name}/items/{id}"), get_item)
    r.add_delete(route(PREFIX + "/{name}/items/{id}"), delete_item)
    r.add_get(route(PREFIX + "/{name}/ids"), list_ids)
    r.add_post(route(PREFIX + "/{name}/search"), search)
    r.add_post(MULTI_SEARCH, multi_search)
    r.add_get(SPACES, spaces)
    documents.add_routes(app)
    routes.add_routes(app, lambda a: a[STORE].pool)
    ranker_routes.add_routes(app, lambda a: a[STORE].pool)
    return app


def main() -> int:
    malloc.fixed_thresholds()
    return serve("vectord", make_app, "vectord")


if __name__ == "__main__":
    raise SystemExit(main())
