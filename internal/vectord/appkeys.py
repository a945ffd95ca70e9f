"""The keys of vectord's application state, shared by its route modules (server.py,
corpora.py) so that neither imports the other for them."""

from __future__ import annotations

from aiohttp import web

from internal.config import Config
from internal.ha.follow import LeaderWatch
from internal.vectord.storage.reembed import Reembedder
from internal.vectord.storage.store import Store
from internal.vectord.storage.warm import Warmer

CFG: web.AppKey[Config] = web.AppKey("cfg", Config)
STORE: web.AppKey[Store] = web.AppKey("store", Store)
REEMBED: web.AppKey[Reembedder] = web.AppKey("reembed", Reembedder)
LEADER: web.AppKey[LeaderWatch] = web.AppKey("leader", LeaderWatch)
WARMER: web.AppKey[Warmer] = web.AppKey("warmer", Warmer)
