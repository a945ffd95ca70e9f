"""vectord's routes for the learned ranker's models: the stack's own (matrixd trains and
serves them; only vectord touches PostgreSQL). POST /internal/rankers stores a version,
GET /internal/rankers lists them (?playbook_corpus=&limit=), GET /internal/rankers/current
gives the newest of each playbook and corpora with its trees."""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web

from internal.api import validate
from internal.api.ranker import NewRanker, StoredRankers
from internal.common.errors import InvalidArgument
from internal.common.web import json_response, read_json
from internal.pg.resilient import ResilientPool
from internal.vectord.storage import rankers

log = structlog.get_logger()

MAX_LIST = 1000


def _limit(request: web.Request) -> int:
    raw = request.query.get("limit", "100")
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"limit: expected an integer, got {raw[:40]!r}",
                              field="limit") from None
    if not 1 <= value <= MAX_LIST:
        raise InvalidArgument(f"limit: must be in 1..{MAX_LIST}, got {value}", field="limit")
    return value


def add_routes(app: web.Application, pool_of: Callable[[web.Application], ResilientPool]) -> None:
    """POST/GET /internal/rankers, GET /internal/rankers/current."""

    async def save(request: web.Request) -> web.Response:
        body = await read_json(request, NewRanker)
        validate.corpus_name(body.playbook_corpus, "playbook_corpus")
        for i, name in enumerate(body.corpora):
            validate.corpus_name(name, f"corpora[{i}]")
        saved = await rankers.save(pool_of(request.app), body)
        log.info("ranker_saved", ranker=saved.id, playbook=body.playbook_corpus,
                 corpora=body.corpora, trees=body.trees)
        return json_response(saved, status=201)

    async def list_all(request: web.Request) -> web.Response:
        name = request.query.get("playbook_corpus") or None
        if name is not None:
            validate.corpus_name(name, "playbook_corpus")
        rows = await rankers.list_rankers(pool_of(request.app), name, _limit(request))
        return json_response(StoredRankers(rankers=rows))

    async def current(request: web.Request) -> web.Response:
        return json_response(StoredRankers(rankers=await rankers.current(pool_of(request.app))))

    app.router.add_post("/internal/rankers", save)
    app.router.add_get("/internal/rankers", list_all)
    app.router.add_get("/internal/rankers/current", current)
