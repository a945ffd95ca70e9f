"""matrixd: one query across many corpora, merged with attribution, boosted by feedback.

Routes: GET /v1/matrix/corpora, POST /v1/matrix/search, POST /v1/matrix/answer (and
/answer/feedback), POST /v1/matrix/playbooks/record,
POST /v1/matrix/relevance, POST /v1/matrix/{analyze,normalize,smart_search,search_auto},
GET /v1/matrix/playbooks, DELETE /v1/matrix/playbooks/{playbook_id},
POST /v1/matrix/ranker/train, GET /v1/matrix/ranker,
GET /readyz (and /healthz from make_base_app). Handlers are thin: the search policy is
internal.matrixd.search, answers internal.matrixd.answer, query intelligence
internal.matrixd.smart, the playbook's I/O
internal.matrixd.playbook, the learned ranker internal.matrixd.ranker, the scoring rules
the I/O-free modules merge, boost, downgrade, relevance, analyze, plan, reflect and
strategy.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator

import aiohttp
import structlog
from aiohttp import web

from internal.api.answer import AnswerFeedback, AnswerRequest, ErrorEvent
from internal.api.matrixd import (
    AnalyzeRequest,
    MatrixSearchRequest,
    NormalizeRequest,
    RecordRequest,
    RelevanceRequest,
    SearchAutoRequest,
    SmartSearchRequest,
)
from internal.api.ranker import RankerTraining, TrainRanker
from internal.api.responses import (
    MatrixCorpora,
    MatrixCorpus,
    NormalizeResponse,
    PlaybookDeleted,
    PlaybookList,
    RelevanceFocus,
    RelevanceResponse,
    ScoredChunk,
)
from internal.api.validate import corpus_name
from internal.clients.embed import EmbedClient, make_client
from internal.clients.vectord import VectordClient
from internal.common.auth import as_service, caller, protect, service_headers
from internal.common.daemon import serve
from internal.common.errors import (
    InvalidArgument,
    LakehouseError,
    NotFound,
    ServiceError,
    UpstreamError,
    describe,
)
from internal.common.web import (
    REQUEST_ID_HEADER,
    json_response,
    make_base_app,
    read_json,
    request_id,
    route,
)
from internal.config import Config
from internal.matrixd import answer, playbook, ranker, relevance, smart
from internal.matrixd.deps import Deps
from internal.matrixd.ranker.job import Trainer
from internal.matrixd.search import run_search
from internal.understanding import strategy

log = structlog.get_logger()

DEPS: web.AppKey[Deps] = web.AppKey("deps", Deps)
TRAINER: web.AppKey[Trainer] = web.AppKey("trainer", Trainer)
ANSWERING: web.AppKey[answer.Answering] = web.AppKey("answering", answer.Answering)
# search_auto's per-strategy times of recent requests (plain searches feed it too).
COSTS: web.AppKey[strategy.CostModel] = web.AppKey("costs", strategy.CostModel)


# ---- corpora -----------------------------------------------------------------------------

async def corpora_handler(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    try:
        rows = await deps.vectord.list_corpora()
    except ServiceError as exc:
        if exc.status >= 500 and exc.status != 503:  # a 503 (PostgreSQL down) stays one
            raise UpstreamError(describe(exc)) from None
        raise
    return json_response(MatrixCorpora(corpora=[
        MatrixCorpus(name=r.name, count=r.count, dim=r.dim, model=r.model, metric=r.metric,
                     language=r.language) for r in rows]))


async def search_handler(request: web.Request) -> web.Response:
    body = await read_json(request, MatrixSearchRequest)
    out = await run_search(request.app[DEPS], body)
    if out.mode in strategy.strategies() and not out.degraded:
        request.app[COSTS].observe(out.mode, out.took_ms)
    return json_response(out)


# ---- answers ------------------------------------------------------------------------------

async def answer_handler(request: web.Request) -> web.StreamResponse:
    body = await read_json(request, AnswerRequest)
    prepared = await answer.prepare(request.app[DEPS], request.app[ANSWERING], body)
    if not body.stream:
        return json_response(await answer.complete(prepared))
    # Everything a request can get wrong was raised above, as a status; from here on a
    # failure is the stream's last event.
    resp = web.StreamResponse(headers={"Content-Type": answer.CONTENT_TYPE,
                                       "Cache-Control": "no-cache",
                                       REQUEST_ID_HEADER: request_id(request)})
    await resp.prepare(request)
    try:
        async with contextlib.aclosing(answer.events(prepared)) as events:
            async for event in events:
                await resp.write(answer.frame(event))
    except ConnectionResetError:  # the client left; the model's stream closed with `events`
        log.info("answer_stream_left")
        return resp
    except LakehouseError as exc:
        message = "internal error" if exc.status >= 500 and exc.code == "internal" else exc.message
        await resp.write(answer.frame(ErrorEvent(code=exc.code, message=message)))
    except Exception:
        log.exception("answer_stream_failed")
        await resp.write(answer.frame(ErrorEvent(code="internal", message="internal error")))
    await resp.write(answer.DONE_FRAME)
    await resp.write_eof()
    return resp


async def answer_feedback_handler(request: web.Request) -> web.Response:
    body = await read_json(request, AnswerFeedback)
    return json_response(await answer.record(request.app[DEPS], body))


# ---- query intelligence -------------------------------------------------------

async def analyze_handler(request: web.Request) -> web.Response:
    body = await read_json(request, AnalyzeRequest)
    return json_response(await smart.analyze_query(body))


async def normalize_handler(request: web.Request) -> web.Response:
    body = await read_json(request, NormalizeRequest)
    done = await smart.normalize_observations(request.app[DEPS], body)
    return json_response(NormalizeResponse(observations=[n.to_wire() for n in done]))


async def smart_search_handler(request: web.Request) -> web.Response:
    body = await read_json(request, SmartSearchRequest)
    out = await smart.smart_search(request.app[DEPS], body)
    request.app[COSTS].observe("smart", out.took_ms)
    return json_response(out)


async def search_auto_handler(request: web.Request) -> web.Response:
    body = await read_json(request, SearchAutoRequest)
    return json_response(await smart.search_auto(request.app[DEPS], body, request.app[COSTS]))


# ---- playbook record ---------------------------------------------------------------------

async def record_handler(request: web.Request) -> web.Response:
    body = await read_json(request, RecordRequest)
    scope = caller()
    if scope is not None and not scope.sees(body.answer_corpus):
        # As check_answer answers a corpus that does not exist.
        raise NotFound(f"answer_corpus: corpus {body.answer_corpus!r} not found",
                       field="answer_corpus")
    with as_service():  # the playbook is the stack's; the caller's right was decided above
        return json_response(await playbook.record(request.app[DEPS], body))


def _playbook_name(request: web.Request) -> str:
    name = request.query.get("playbook_corpus") or request.app[DEPS].cfg.playbook_corpus
    corpus_name(name, "playbook_corpus")
    return name


async def list_playbooks_handler(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    name = _playbook_name(request)
    q = request.query
    answer_id = q.get("answer_id") or None
    answer_corpus = q.get("answer_corpus") or None
    if answer_corpus is not None:
        corpus_name(answer_corpus, "answer_corpus")
    raw_limit = q.get("limit", "100")
    try:
        limit = int(raw_limit)
    except ValueError:
        raise InvalidArgument(f"limit: expected an integer, got {raw_limit!r}", field="limit") from None
    if not 1 <= limit <= playbook.MAX_LIST:
        raise InvalidArgument(f"limit: must be in 1..{playbook.MAX_LIST}, got {limit}", field="limit")
    with as_service():
        entries = await playbook.list_entries(deps, name, answer_id, answer_corpus, limit)
    scope = caller()
    entries = [e for e in entries if scope is None or scope.sees(e.answer_corpus)]
    return json_response(PlaybookList(playbook_corpus=name, entries=entries))


async def delete_playbook_handler(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    name = _playbook_name(request)
    try:
        pid = playbook.check_playbook_id(request.match_info["playbook_id"])
    except ValueError as exc:
        raise InvalidArgument(f"playbook_id: {exc}", field="playbook_id") from None
    with as_service():
        await playbook.delete_entry(deps, name, pid, caller())
    log.info("playbook_deleted", corpus=name, playbook_id=pid)
    return json_response(PlaybookDeleted(deleted=pid, playbook_corpus=name))


# ---- the learned ranker ----------------------------------------------------------------

async def train_ranker_handler(request: web.Request) -> web.Response:
    body = await read_json(request, TrainRanker)
    scope = caller()
    out = await ranker.train(request.app[DEPS], request.app[TRAINER], body, scope,
                             scope.key_id if scope is not None else "anonymous")
    if isinstance(out, RankerTraining):
        return json_response(out, status=202)
    return json_response(out.public(current=True))


async def ranker_status_handler(request: web.Request) -> web.Response:
    q = request.query
    raw_limit = q.get("limit", "20")
    try:
        limit = int(raw_limit)
    except ValueError:
        raise InvalidArgument(f"limit: expected an integer, got {raw_limit[:40]!r}",
                              field="limit") from None
    if not 1 <= limit <= playbook.MAX_LIST:
        raise InvalidArgument(f"limit: must be in 1..{playbook.MAX_LIST}, got {limit}",
                              field="limit")
    return json_response(await ranker.status(request.app[DEPS], request.app[TRAINER],
                                             q.get("playbook_corpus") or None, caller(), limit))


# ---- relevance ---------------------------------------------------------------------------

async def relevance_handler(request: web.Request) -> web.Response:
    body = await read_json(request, RelevanceRequest)
    if not body.focus.path.strip():
        raise InvalidArgument("focus.path: must not be empty", field="focus.path")
    if not body.chunks:
        raise InvalidArgument("chunks: give at least one chunk", field="chunks")
    for i, c in enumerate(body.chunks):
        if not (c.source or c.doc_id):
            raise InvalidArgument(f"chunks[{i}]: needs source or doc_id", field=f"chunks[{i}].source")
    if not math.isfinite(body.threshold):
        raise InvalidArgument("threshold: must be a finite number", field="threshold")
    scored = relevance.score(body.focus, body.chunks, body.threshold)
    symbols = relevance.focus_symbols(body.focus)

    def row(s: relevance.Scored) -> ScoredChunk:
        c = body.chunks[s.index]
        return ScoredChunk(index=s.index, source=c.source, doc_id=c.doc_id, text=c.text,
                           score=s.total, signals=s.signals)

    return json_response(RelevanceResponse(
        threshold=body.threshold,
        kept=[row(s) for s in scored if s.kept],
        dropped=[row(s) for s in scored if not s.kept],
        focus=RelevanceFocus(path=body.focus.path,
                             language=relevance.language_of(body.focus.path),
                             defined_symbols=sorted(symbols.defined),
                             imported_symbols=sorted(symbols.imported)),
    ))


# ---- readiness and app -------------------------------------------------------------------

async def _probe(client: VectordClient | EmbedClient | None) -> str:
    if client is None:
        return "not_configured"
    try:
        await client.call("GET", "/readyz", timeout=5.0)
    except LakehouseError as exc:
        return f"{exc.code}: {exc.message}"
    return "ok"


async def readyz(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    vectord_state, embedd_state = await asyncio.gather(_probe(deps.vectord), _probe(deps.embed))
    components = {"vectord": vectord_state, "embedd": embedd_state}
    if vectord_state != "ok":
        return json_response({"status": "degraded", "components": components}, 503)
    # Without embedd, lexical and keyword search still work: degraded, not down.
    status = "ok" if embedd_state == "ok" else "degraded"
    return json_response({"status": status, "components": components})


@contextlib.asynccontextmanager
async def _model_session() -> AsyncIterator[aiohttp.ClientSession]:
    """The session answers' model is called on: none of the stack's headers (its service
    token is for its daemons, never for another server)."""
    async with aiohttp.ClientSession() as session:
        yield session


def make_app(cfg: Config) -> web.Application:
    """The matrixd app: one ClientSession for vectord and embedd, opened and closed with it."""
    mcfg = cfg.matrixd
    app = make_base_app()
    protect(app, cfg)

    async def clients_ctx(app: web.Application) -> AsyncIterator[None]:
        # limit_per_host bounds connections to vectord; a fan-out of max_corpora fits.
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=max(100, 2 * mcfg.max_corpora))
        async with aiohttp.ClientSession(connector=connector,
                                         headers=service_headers(cfg)) as session:
            deps = app[DEPS] = Deps(
                cfg=mcfg,
                vectord=VectordClient(session, mcfg.vectord_url, mcfg.timeout_seconds),
                embed=make_client(session, mcfg.embedd_url, mcfg.timeout_seconds),
            )
            async with ranker.running(deps) as trainer, _model_session() as model:
                app[TRAINER] = trainer
                app[ANSWERING] = answer.Answering(cfg.answer, answer.open_chat(
                    cfg.answer, model, os.environ.get(cfg.answer.api_key_env, "")
                    if cfg.answer.api_key_env else ""))
                yield

    app.cleanup_ctx.append(clients_ctx)
    app[COSTS] = strategy.CostModel()
    app.router.add_get("/v1/matrix/corpora", corpora_handler)
    app.router.add_post("/v1/matrix/search", search_handler)
    app.router.add_post("/v1/matrix/answer", answer_handler)
    app.router.add_post("/v1/matrix/answer/feedback", answer_feedback_handler)
    app.router.add_post("/v1/matrix/playbooks/record", record_handler)
    app.router.add_get("/v1/matrix/playbooks", list_playbooks_handler)
    app.router.add_delete(route("/v1/matrix/playbooks/{playbook_id}"), delete_playbook_handler)
    app.router.add_post("/v1/matrix/ranker/train", train_ranker_handler)
    app.router.add_get("/v1/matrix/ranker", ranker_status_handler)
    app.router.add_post("/v1/matrix/relevance", relevance_handler)
    app.router.add_post("/v1/matrix/analyze", analyze_handler)
    app.router.add_post("/v1/matrix/normalize", normalize_handler)
    app.router.add_post("/v1/matrix/smart_search", smart_search_handler)
    app.router.add_post("/v1/matrix/search_auto", search_auto_handler)
    app.router.add_get("/readyz", readyz)
    return app


def main() -> int:
    return serve("matrixd", make_app, "matrixd")


if __name__ == "__main__":
    raise SystemExit(main())
