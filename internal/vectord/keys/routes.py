"""vectord's key routes: /v1/keys (admin, through the gateway) and the gateway's lookup."""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web

from internal.api import keys
from internal.common.errors import NotFound
from internal.common.web import json_response, read_json, route
from internal.pg.resilient import ResilientPool
from internal.vectord.keys import store

log = structlog.get_logger()

def _id(request: web.Request) -> str:
    key_id = request.match_info["key_id"]
    if not keys.valid_id(key_id):
        raise NotFound(f"key {key_id[:40]!r} not found", field="key_id")
    return key_id


def add_routes(app: web.Application, pool_of: Callable[[web.Application], ResilientPool]) -> None:
    """POST/GET /v1/keys, DELETE /v1/keys/{key_id}, GET /internal/keys/{key_id}."""

    async def create(request: web.Request) -> web.Response:
        body = keys.check(await read_json(request, keys.CreateKey))
        key_id, secret = keys.new_secret()
        info = await store.create(
            pool_of(request.app), key_id, body.name, keys.secret_hash(secret),
            keys.signing_key(secret), sorted(set(body.actions)), list(dict.fromkeys(body.corpora)),
            body.expires_at)
        log.info("key_created", created_key=key_id, actions=info.actions)
        created = keys.CreatedKey(**{f: getattr(info, f) for f in info.__struct_fields__},
                                  key=secret)
        return json_response(created, status=201)

    async def list_all(request: web.Request) -> web.Response:
        return json_response(keys.KeyList(keys=await store.list_keys(pool_of(request.app))))

    async def revoke(request: web.Request) -> web.Response:
        key_id = _id(request)
        if not await store.revoke(pool_of(request.app), key_id):
            raise NotFound(f"key {key_id!r} not found", field="key_id")
        log.info("key_revoked", revoked_key=key_id)
        return json_response(keys.KeyRevoked(revoked=key_id))

    async def lookup(request: web.Request) -> web.Response:
        found = await store.use(pool_of(request.app), _id(request))
        if found is None:
            raise NotFound("key not found", field="key_id")
        return json_response(found)

    app.router.add_post("/v1/keys", create)
    app.router.add_get("/v1/keys", list_all)
    app.router.add_delete(route("/v1/keys/{key_id}"), revoke)
    app.router.add_get(route("/internal/keys/{key_id}"), lookup)
