"""Fair shares of the gateway between clients: who runs now, who waits, who is told to
come back later. Pure policy: no I/O, no clock, no event loop (internal.gateway.admission
drives it).

Each client may have `per_client` requests in flight and `queue` more waiting; all
clients together `total` in flight. A request past its client's queue is refused at once
(the gateway answers 429 with Retry-After). When a request ends, the freed places go to
the waiting requests of the clients in turn (round robin, oldest first within a client),
so a client with a long queue cannot take every place that frees while another waits:
a second client waits for at most one place to free, never behind the first's queue.

`light` places more (0: none) are for light clients only: a request of a client with
nothing in flight and nothing waiting runs at once while fewer than `total + light`
requests are in flight, so a client asking now and then never waits for a busy one's
place; the places that free go to waiting requests only up to `total`.

With `share_seconds` (0: off), the clients that sent a request within that many seconds
(or have one in flight or waiting) share `total` evenly: each may have at most
`total // active` in flight (at least 1; `per_client` still caps it). A client alone has
every place; a busy client beside one asking once a second keeps half, so the light
one's request finds a place free instead of four searches sharing the cores with it.
With `alone` (0: off; share_seconds on), a client alone in the window may have up to
`alone` in flight, more than `total`: the few places keep many clients' requests from
queueing inside the daemons, which does not arise with one client, while cheap requests
(a vector search crosses five processes) need more than `total` in flight to keep the
cores busy. A second client seen puts the lane back to `total` at once; its first request
still starts in the light place, and the lone client's extra requests drain as they end.
The caller passes the time (`now`), so the policy stays free of clocks.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Literal

# Weight of the newest request in a client's mean time in flight (exponential average).
_ALPHA = 0.2
MAX_RETRY_AFTER = 60


@dataclass(frozen=True)
class Shares:
    """The limits ([gateway] max_in_flight, client_in_flight, client_queue)."""

    total: int
    per_client: int
    queue: int
    light: int = 0  # places beyond total for a client with nothing in flight or waiting
    share_seconds: float = 0.0  # clients seen within it share total evenly (0: off)
    alone: int = 0  # places for a client alone in the window (share_seconds on; 0: total)

    def __post_init__(self) -> None:
        if self.total < 1 or self.per_client < 1 or self.queue < 0 or self.light < 0 or \
                self.share_seconds < 0 or self.alone < 0:
            raise ValueError("total and per_client must be >= 1, queue, light, "
                             "share_seconds and alone >= 0")


@dataclass(frozen=True)
class Decision:
    """What happens to an arriving request: `run` now, `wait` (ticket names it in
    `release`'s answers and in `cancel`), or `reject` (come back in retry_after s)."""

    action: Literal["run", "wait", "reject"]
    ticket: int = 0
    retry_after: int = 0


@dataclass
class _Client:
    in_flight: int = 0
    waiting: deque[int] = field(default_factory=deque)
    mean_seconds: float = 0.0  # time in flight, averaged over its recent requests


class FairShares:
    """The state of every client's share (see the module's docstring)."""

    def __init__(self, shares: Shares) -> None:
        self.shares = shares
        self.in_flight = 0
        self._clients: dict[str, _Client] = {}
        # Clients with waiting requests, in the order their turn comes.
        self._turns: OrderedDict[str, None] = OrderedDict()
        self._owner: dict[int, str] = {}  # waiting ticket -> client
        self._next_ticket = 1
        # share_seconds: client -> when it was last seen, oldest first.
        self._seen: OrderedDict[str, float] = OrderedDict()

    def arrive(self, client: str, now: float = 0.0) -> Decision:
        """A request of `client` arrives at `now` (seconds, any fixed origin)."""
        c = self._clients.setdefault(client, _Client())
        before = self.places()  # a lone client's places, when this client is new
        self._see(client, now)
        # Places free now only while no one waits for them: waiters left over are those
        # whose own client is at its limit, so running this one jumps no one's turn.
        if not c.waiting and c.in_flight < self.limit() and (
                self.in_flight < self.places() or (
                    c.in_flight == 0 and self.in_flight < before + self.shares.light)):
            c.in_flight += 1
            self.in_flight += 1
            return Decision("run")
        if len(c.waiting) >= self.shares.queue:
            return Decision("reject", retry_after=self.retry_after(client))
        ticket = self._next_ticket
        self._next_ticket += 1
        c.waiting.append(ticket)
        self._owner[ticket] = client
        self._turns.setdefault(client, None)
        return Decision("wait", ticket)

    def release(self, client: str, seconds: float = 0.0, now: float = 0.0) -> list[int]:
        """A request of `client` that ran for `seconds` ends at `now`: the waiting tickets
        that run now (the caller wakes them)."""
        self._see(None, now)
        c = self._clients[client]
        c.in_flight -= 1
        self.in_flight -= 1
        c.mean_seconds = seconds if c.mean_seconds == 0.0 else (
            (1 - _ALPHA) * c.mean_seconds + _ALPHA * seconds)
        started = self._start_waiting()
        self._forget(client)
        return started

    def cancel(self, ticket: int) -> bool:
        """A waiting request gives up (timed out, client gone): True when it was still
        waiting; False when it had started already (then the caller must release it)."""
        client = self._owner.pop(ticket, None)
        if client is None:
            return False
        c = self._clients[client]
        c.waiting.remove(ticket)
        if not c.waiting:
            self._turns.pop(client, None)
        self._forget(client)
        return True

    def retry_after(self, client: str) -> int:
        """Whole seconds after which `client`'s queue has likely moved by one request: its
        queue drained at its mean time in flight, `per_client` at once (1 to 60)."""
        c = self._clients.get(client)
        if c is None:
            return 1
        waiting = len(c.waiting) + 1
        estimate = c.mean_seconds * waiting / self.shares.per_client
        return min(MAX_RETRY_AFTER, max(1, math.ceil(estimate)))

    @property
    def waiting(self) -> int:
        """Requests of all clients waiting for a place."""
        return len(self._owner)

    def loads(self) -> dict[str, tuple[int, int]]:
        """(in flight, waiting) of each client with either (the others are forgotten)."""
        return {name: (c.in_flight, len(c.waiting)) for name, c in self._clients.items()}

    def load(self, client: str) -> tuple[int, int]:
        """(in flight, waiting) of `client`."""
        c = self._clients.get(client)
        return (c.in_flight, len(c.waiting)) if c is not None else (0, 0)

    def _start_waiting(self) -> list[int]:
        started: list[int] = []
        skipped = 0  # clients in a row whose turn came but who are at their limit
        while self.in_flight < self.places() and self._turns and skipped < len(self._turns):
            client = next(iter(self._turns))
            self._turns.move_to_end(client)
            c = self._clients[client]
            if c.in_flight >= self.limit():
                skipped += 1
                continue
            skipped = 0
            ticket = c.waiting.popleft()
            del self._owner[ticket]
            if not c.waiting:
                self._turns.pop(client)
            c.in_flight += 1
            self.in_flight += 1
            started.append(ticket)
        return started

    def places(self) -> int:
        """The requests of all clients that may be in flight now: `alone` while one client
        is active in the window, else `total`."""
        s = self.shares
        if s.alone > s.total and s.share_seconds > 0 and len(self._seen) <= 1:
            return s.alone
        return s.total

    def limit(self) -> int:
        """How many requests one client may have in flight now."""
        active = len(self._seen)
        if active <= 1:
            return self.shares.per_client
        return min(self.shares.per_client, max(1, self.shares.total // active))

    def _see(self, client: str | None, now: float) -> None:
        """Note `client` seen at `now`; forget the clients unseen for share_seconds with
        nothing in flight or waiting (a busy one counts as seen now)."""
        window = self.shares.share_seconds
        if window <= 0:
            return
        if client is not None:
            self._seen[client] = now
            self._seen.move_to_end(client)
        while self._seen:
            oldest, seen = next(iter(self._seen.items()))
            if now - seen < window:
                break
            if oldest in self._clients:
                self._seen[oldest] = now
                self._seen.move_to_end(oldest)
            else:
                del self._seen[oldest]

    def _forget(self, client: str) -> None:
        """Drop an idle client's record (bounded memory however many clients came and
        went); its mean time in flight starts again."""
        c = self._clients.get(client)
        if c is not None and c.in_flight == 0 and not c.waiting:
            del self._clients[client]
