"""vectord: corpora of vectors and text on PostgreSQL + pgvector, over HTTP (docs/API.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from psycopg import sql

from internal.common.auth import protect
from internal.common.daemon import serve
from internal.common.errors import InvalidArgument, LakehouseError, PayloadTooLarge
from internal.common.web import json_response, make_base_app, read_json
from internal.config import Config
from internal.pg import embedded
from internal.pg.pool import make_pool
from internal.vectord import hits, language, lexical_search, schema, validate
from internal.vectord.filters import build_where
from internal.vectord.models import (
    MAX_IDS_PAGE,
    Corpus,
    CorpusSearchResult,
    CreateCorpus,
    DeleteItems,
    Hit,
    MultiSearchRequest,
    MultiSearchResponse,
    SearchError,
    SearchRequest,
    SearchResponse,
    UpsertRequest,
)
from internal.vectord.store import PreparedItem, Store

log = structlog.get_logger()

CFG: web.AppKey[Config] = web.AppKey("cfg", Config)
STORE: web.AppKey[Store] = web.AppKey("store", Store)

PREFIX = "/v1/vectors/corpora"
MULTI_SEARCH = "/v1/vectors/search"
MAX_SEARCH_CORPORA = 1000

# A search mode's implementation: the where-clause and params come from filters.build_where.
Searcher = Callable[[Store, Corpus, SearchRequest, sql.Composable, dict[str, Any]],
                    Awaitable[list[Hit]]]


async def _database(app: web.Application) -> AsyncIterator[None]:
    """Embedded PostgreSQL (when no DSN), migrations, then the pool; undone in reverse."""
    cfg = app[CFG].vectord
    server: embedded.EmbeddedPostgres | None = None
    dsn = cfg.dsn
    if not dsn:
        server = await asyncio.to_thread(embedded.start, cfg.data_dir)
        dsn = server.dsn
    try:
        db = await schema.migrate(dsn)
        pool = make_pool(dsn, cfg.pool_min, cfg.pool_max)
        await pool.open(wait=True, timeout=30.0)
        try:
            app[STORE] = Store(pool, cfg, db)
            log.info("vectord_ready", vector=db.vector_version, trgm=db.trgm,
                     schema_version=db.version)
            yield
        finally:
            await pool.close()
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


def _name(request: web.Request) -> str:
    return validate.corpus_name(request.match_info["name"])


# --- corpora -----------------------------------------------------------------

async def create_corpus(request: web.Request) -> web.Response:
    body = await read_json(request, CreateCorpus)
    validate.corpus_name(body.name)
    validate.dim(body.dim)
    lang = language.normalize_corpus_language(body.language, "language")
    model = body.model.strip() if body.model else None
    corpus = await request.app[STORE].create_corpus(
        body.name, body.dim, body.metric, lang, model or None, body.defer_index)
    log.info("corpus_created", corpus=corpus.name, dim=corpus.dim, metric=corpus.metric)
    return json_response(corpus.public(0), status=201)


async def list_corpora(request: web.Request) -> web.Response:
    return json_response({"corpora": await request.app[STORE].list_corpora()})


async def get_corpus(request: web.Request) -> web.Response:
    return json_response(await request.app[STORE].describe(_name(request)))


async def delete_corpus(request: web.Request) -> web.Response:
    name = _name(request)
    await request.app[STORE].delete_corpus(name)
    log.info("corpus_deleted", corpus=name)
    return json_response({"deleted": name})


async def build_index(request: web.Request) -> web.Response:
    return json_response(await request.app[STORE].build_index(_name(request)))


# --- items -------------------------------------------------------------------

def _prepare(corpus: Corpus, body: UpsertRequest) -> list[PreparedItem]:
    """Validate every item (naming index and field) before anything is written."""
    out = []
    for i, it in enumerate(body.items):
        arr = validate.item(it, i, corpus.dim, corpus.metric)
        lang = language.resolve_item_language(it.language, it.text, corpus.language,
                                              f"items[{i}].language")
        out.append(PreparedItem.of(it, arr, lang))
    return out


async def upsert_items(request: web.Request) -> web.Response:
    store = request.app[STORE]
    name = _name(request)
    body = await read_json(request, UpsertRequest)
    limit = store.cfg.max_batch
    if len(body.items) > limit:
        raise PayloadTooLarge(f"items: {len(body.items)} items; at most {limit} per call",
                              field="items")
    model = body.model.strip() if body.model else None

    async def run_upsert(corpus: Corpus) -> int:
        prepared = await asyncio.to_thread(_prepare, corpus, body)
        return await store.upsert(corpus, prepared, model or None)

    n = await store.with_corpus(name, run_upsert)
    return json_response({"upserted": n})


async def get_item(request: web.Request) -> web.Response:
    store = request.app[STORE]
    item_id = request.match_info["id"]

    async def run_get(corpus: Corpus) -> dict[str, Any]:
        return await store.get_item(corpus, item_id)

    return json_response(await store.with_corpus(_name(request), run_get))


async def delete_items(request: web.Request) -> web.Response:
    store = request.app[STORE]
    name = _name(request)
    body = await read_json(request, DeleteItems)
    if len(body.ids) > MAX_IDS_PAGE:
        raise PayloadTooLarge(f"ids: at most {MAX_IDS_PAGE} per call", field="ids")
    for i, item_id in enumerate(body.ids):
        validate.item_id(item_id, f"ids[{i}]")

    async def run_delete(corpus: Corpus) -> int:
        return await store.delete_items(corpus, body.ids)

    return json_response({"deleted": await store.with_corpus(name, run_delete)})


def _int_param(request: web.Request, key: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"{key}: expected an integer, got {raw[:40]!r}", field=key) from None
    if not lo <= value <= hi:
        raise InvalidArgument(f"{key}: must be in {lo}..{hi}, got {value}", field=key)
    return value


async def list_ids(request: web.Request) -> web.Response:
    store = request.app[STORE]
    name = _name(request)
    prefix = request.query.get("prefix", "")
    after = request.query.get("after", "")
    limit = _int_param(request, "limit", 1000, 1, MAX_IDS_PAGE)

    async def run_list(corpus: Corpus) -> list[dict[str, Any]]:
        return await store.list_ids(corpus, prefix, after, limit)

    rows = await store.with_corpus(name, run_list)
    next_after = rows[-1]["id"] if len(rows) == limit else None
    return json_response({"items": rows, "next_after": next_after})


# --- search ------------------------------------------------------------------

async def search_vector(store: Store, corpus: Corpus, req: SearchRequest,
                        where: sql.Composable, params: dict[str, Any]) -> list[Hit]:
    if req.query_vector is None:
        raise InvalidArgument("query_vector: required for mode 'vector'", field="query_vector")
    query = validate.vector(req.query_vector, corpus.dim, corpus.metric, "query_vector")
    ef = req.ef_search if req.ef_search is not None else store.cfg.ef_search
    rows = await store.vector_search(corpus, query, req.k, ef, where, params)
    return hits.from_vector_rows(corpus, rows)


async def search_keyword(store: Store, corpus: Corpus, req: SearchRequest,
                         where: sql.Composable, params: dict[str, Any]) -> list[Hit]:
    text = (req.query_text or "").strip()
    if not text:
        return []  # a blank query matches everything: answer nothing, scan nothing
    rows = await store.keyword_search(corpus, text, req.k, where, params)
    return hits.from_keyword_rows(corpus, rows)


# Mode -> implementation; the lexical and hybrid modes register here (issue 3).
SEARCHERS: dict[str, Searcher] = {
    "vector": search_vector,
    "keyword": search_keyword,
    "lexical": lexical_search.search_lexical,
    "hybrid": lexical_search.search_hybrid,
}


# A request-wide search, ready to run on any corpus.
CorpusSearch = Callable[[Corpus], Awaitable[list[Hit]]]


def _corpus_search(store: Store, req: SearchRequest) -> CorpusSearch:
    """Check the request-wide fields (400 naming the field) and bind the search mode."""
    validate.k(req.k)
    if req.ef_search is not None and not 1 <= req.ef_search <= 1000:
        raise InvalidArgument(f"ef_search: must be in 1..1000, got {req.ef_search}",
                              field="ef_search")
    searcher = SEARCHERS.get(req.mode)
    if searcher is None:
        raise InvalidArgument(f"mode: {req.mode!r} is not available", field="mode")
    where, params = build_where(req.filter)

    async def run_search(corpus: Corpus) -> list[Hit]:
        return await searcher(store, corpus, req, where, params)

    return run_search


async def search(request: web.Request) -> web.Response:
    started = time.perf_counter()
    store = request.app[STORE]
    name = _name(request)
    req = await read_json(request, SearchRequest)
    found = await store.with_corpus(name, _corpus_search(store, req))
    took = round((time.perf_counter() - started) * 1000, 3)
    return json_response(SearchResponse(corpus=name, mode=req.mode, hits=found, took_ms=took))


def _corpus_error(corpus: str, exc: Exception) -> CorpusSearchResult:
    """A failed corpus of a multi-search, as the per-corpus route would have answered it."""
    if isinstance(exc, LakehouseError) and not (exc.status >= 500 and exc.code == "internal"):
        return CorpusSearchResult(corpus=corpus, status=exc.status,
                                  error=SearchError(exc.code, exc.message, exc.field))
    if isinstance(exc, LakehouseError):
        log.error("search_failed", corpus=corpus, error=exc.message)
    else:
        log.error("search_crashed", corpus=corpus, exc_info=exc)
    return CorpusSearchResult(corpus=corpus, status=500,
                              error=SearchError("internal", "internal error"))


async def multi_search(request: web.Request) -> web.Response:
    """One search over several corpora at once, each on its own pooled connection."""
    started = time.perf_counter()
    store = request.app[STORE]
    req = await read_json(request, MultiSearchRequest)
    if not req.corpora:
        raise InvalidArgument("corpora: name at least one corpus", field="corpora")
    if len(req.corpora) > MAX_SEARCH_CORPORA:
        raise InvalidArgument(f"corpora: at most {MAX_SEARCH_CORPORA} corpora, "
                              f"got {len(req.corpora)}", field="corpora")
    seen: set[str] = set()
    for i, name in enumerate(req.corpora):
        validate.corpus_name(name, f"corpora[{i}]")
        if name in seen:
            raise InvalidArgument(f"corpora[{i}]: {name!r} is named twice",
                                  field=f"corpora[{i}]")
        seen.add(name)
    run_search = _corpus_search(store, req)

    async def one(name: str) -> CorpusSearchResult:
        t0 = time.perf_counter()
        try:
            found = await store.with_corpus(name, run_search)
        except Exception as exc:  # reported for this corpus; the others still answer
            return _corpus_error(name, exc)
        return CorpusSearchResult(corpus=name, hits=found,
                                  took_ms=round((time.perf_counter() - t0) * 1000, 3))

    results = await asyncio.gather(*(one(name) for name in req.corpora))
    took = round((time.perf_counter() - started) * 1000, 3)
    return json_response(MultiSearchResponse(mode=req.mode, results=results, took_ms=took))


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
    return json_response({"status": "ok", "components": {"postgres": pg}})


def make_app(cfg: Config) -> web.Application:
    """vectord's application; the database is opened in a cleanup_ctx."""
    app = make_base_app()
    protect(app, cfg)
    app[CFG] = cfg
    app.cleanup_ctx.append(_database)
    r = app.router
    r.add_get("/readyz", readyz)
    r.add_post(PREFIX, create_corpus)
    r.add_get(PREFIX, list_corpora)
    r.add_get(PREFIX + "/{name}", get_corpus)
    r.add_delete(PREFIX + "/{name}", delete_corpus)
    r.add_post(PREFIX + "/{name}/index", build_index)
    r.add_post(PREFIX + "/{name}/items", upsert_items)
    r.add_post(PREFIX + "/{name}/items/delete", delete_items)
    r.add_get(PREFIX + "/{name}/items/{id}", get_item)
    r.add_get(PREFIX + "/{name}/ids", list_ids)
    r.add_post(PREFIX + "/{name}/search", search)
    r.add_post(MULTI_SEARCH, multi_search)
    return app


def main() -> int:
    return serve("vectord", make_app, "vectord")


if __name__ == "__main__":
    raise SystemExit(main())
