"""The gateway's admission of each /v1 request: FairShares driven on the event loop.

Who a client is is `client_of`'s answer (docs/decisions/0132-client-is-its-key.md):
the key's id when an API key or a tenant token authenticated (a tenant token counts as
its signing key), 12 hex digits of the SHA-256 of a `[gateway] tokens` token, the peer's
address with auth off. Nothing of a secret is kept or shown (metric labels, logs). A
request past its client's share is answered 429 `rate_limited` with Retry-After; a
request that waited `queue_timeout` seconds for a place likewise.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

from aiohttp import web
from aiohttp.typedefs import Middleware

from internal.common.access import ADMIN, Scope
from internal.common.errors import TooManyRequests
from internal.common.web import Handler
from internal.gateway.fairness import FairShares, Shares
from internal.gateway.keyauth import SCOPE_KEY
from internal.gateway.metrics import Metrics

# Routes outside the shares: the MCP session itself (its tool calls come back to /v1 as
# the same client and are counted there), health, metrics and the console's files.
_LIMITED_PREFIX = "/v1/"
# Set on a light client's search (light_priority on): the proxy sends Lakehouse-Priority.
LIGHT_KEY = "lakehouse_light"


def client_of(request: web.Request, auth_on: bool) -> str:
    """The client a request is counted against: `k:` and the key's id (an API key, or the
    key that signed a tenant token: one application is one client however many tokens it
    signs), `t:` and 12 hex digits of the SHA-256 of an admin token (`[gateway] tokens`),
    or with auth off `a:` and the peer's address (a token presented to an open stack
    proves nothing). With auth on the credential must have been checked already: the
    keys middleware runs first, and a request it has not seen is a programming error."""
    if not auth_on:
        return f"a:{request.remote or 'unknown'}"
    scope: Scope | None = request.get(SCOPE_KEY)
    if scope is None:
        raise RuntimeError("admission before authentication: the keys middleware must "
                           "run first")
    if scope.key_id != ADMIN.key_id:
        return f"k:{scope.key_id}"
    _, _, token = request.headers.get("Authorization", "").partition(" ")
    return "t:" + hashlib.sha256(token.strip().encode()).hexdigest()[:12]


def _refusal(message: str, retry_after: int) -> TooManyRequests:
    """The 429 `rate_limited` answer, with its Retry-After."""
    exc = TooManyRequests(message, code="rate_limited")
    exc.retry_after = retry_after
    return exc


class Admission:
    """Runs, queues or refuses each request of one lane (`search` or `write`) by its
    client's share (FairShares)."""

    def __init__(self, lane: str, shares: Shares, queue_timeout: float,
                 metrics: Metrics) -> None:
        self.lane = lane
        self.policy = FairShares(shares)
        self.queue_timeout = queue_timeout
        self.metrics = metrics
        self._waiters: dict[int, asyncio.Future[None]] = {}
        # The lane's and its clients' load gauges are read at a scrape, not set at every
        # request's start and end (docs/decisions/0137-load-gauges-at-scrape.md).
        metrics.at_scrape.append(self.publish)

    def publish(self) -> None:
        """The lane's and each named client's requests in flight and waiting, now."""
        self.metrics.observe_load(self.lane, self.policy.in_flight, self.policy.waiting,
                                  self.policy.loads())

    async def enter(self, client: str) -> tuple[bool, float]:
        """Take one of `client`'s places (waiting for it when the share says so): whether
        the client is light (nothing else in flight or waiting in this lane when it came)
        and when it started (for `leave`); TooManyRequests (`rate_limited`) when refused.
        A plain pair of calls, not a context manager: this runs on every request."""
        arrived = time.perf_counter()
        label = self.metrics.client_label(client)
        light = self.policy.load(client) == (0, 0)
        decision = self.policy.arrive(client, time.monotonic())
        if decision.action == "reject":
            self.metrics.observe_rejected(self.lane, label)
            raise _refusal(f"too many requests from this client (more than "
                           f"{self.policy.shares.per_client} in flight and "
                           f"{self.policy.shares.queue} waiting); retry after "
                           f"{decision.retry_after} s", decision.retry_after)
        if decision.action == "wait":
            await self._wait(client, label, decision.ticket)
        started = time.perf_counter()
        self.metrics.observe_wait(self.lane, label, started - arrived)
        return light, started

    def leave(self, client: str, started: float) -> None:
        """Give back the place `enter` took at `started`."""
        self._release(client, time.perf_counter() - started)

    async def _wait(self, client: str, label: str, ticket: int) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = waiter
        try:
            async with asyncio.timeout(self.queue_timeout):
                await asyncio.shield(waiter)
        except TimeoutError:
            if self.policy.cancel(ticket):
                self.metrics.observe_rejected(self.lane, label)
                retry = self.policy.retry_after(client)
                raise _refusal(f"waited {self.queue_timeout:g} s for a place among this "
                               f"client's requests; retry after {retry} s", retry) from None
            # Started just as the wait ran out: the place is taken, so it runs.
        except asyncio.CancelledError:  # the client went away
            if not self.policy.cancel(ticket):
                self._release(client, 0.0)
            raise
        finally:
            self._waiters.pop(ticket, None)

    def _release(self, client: str, seconds: float) -> None:
        for ticket in self.policy.release(client, seconds, time.monotonic()):
            waiter = self._waiters.get(ticket)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_search(request: web.Request, read_posts: frozenset[str]) -> bool:
    """Whether a request only reads (a search, any GET): the interactive lane's shares."""
    if request.method in _SAFE_METHODS:
        return True
    resource = request.match_info.route.resource
    return resource is not None and resource.canonical in read_posts


def make_middleware(searches: Admission, writes: Admission, read_posts: frozenset[str],
                    auth_on: bool, light_priority: bool = False) -> Middleware:
    """Each /v1 request held to its client's share of its lane: searches and reads share
    `searches` (few places: a question never waits behind many others' questions in the
    daemons), writes share `writes` (a bulk load never takes a search's place). With
    `light_priority`, a light client's search is marked for the daemons (LIGHT_KEY)."""

    @web.middleware
    async def admission_middleware(request: web.Request, handler: Handler
                                   ) -> web.StreamResponse:
        if not request.path.startswith(_LIMITED_PREFIX):
            return await handler(request)
        lane = searches if is_search(request, read_posts) else writes
        client = client_of(request, auth_on)
        light, started = await lane.enter(client)
        try:
            if light_priority and light and lane is searches:
                request[LIGHT_KEY] = True
            return await handler(request)
        finally:
            lane.leave(client, started)

    return admission_middleware
