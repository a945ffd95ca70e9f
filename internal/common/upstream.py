"""Upstream address pools: round-robin, with a failed address skipped for a while.

The one failover rule of Lakehouse: the gateway's proxy and every daemon-to-daemon
client (internal.clients.base.ServiceClient: matrixd and syncd to vectord and
embedd) take their addresses from an Upstream and go through them with `failover`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import aiohttp

from internal.common.errors import Unavailable

T = TypeVar("T")
# outcome ("unreachable", "busy", "lost"), address, the error
Observer = Callable[[str, str, BaseException], None]


def addresses_of(value: str | Sequence[str]) -> tuple[str, ...]:
    """A configured address list; one string is one address, "" none."""
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(a for a in value if a)


class Upstream:
    """One daemon, served by one or more addresses (replicas).

    `order()` gives the addresses to try for one request: the healthy ones in
    round-robin order, then the ones in back-off (soonest to recover first), so a
    daemon that came back is used at once even when it is the only address.
    """

    def __init__(self, name: str, addresses: Sequence[str], backoff_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not addresses:
            raise ValueError(f"{name}: needs at least one address")
        self.name = name
        self.addresses = tuple(a.rstrip("/") for a in addresses)
        self.backoff_seconds = backoff_seconds
        self._clock = clock
        self._turn = itertools.count()
        self._failed_until: dict[str, float] = {}

    def order(self) -> list[str]:
        """Addresses to try, in order, for one request."""
        if not self._failed_until:  # all healthy: just the round-robin turn
            start = next(self._turn) % len(self.addresses)
            return [*self.addresses[start:], *self.addresses[:start]]
        now = self._clock()
        healthy = [a for a in self.addresses if self._failed_until.get(a, 0.0) <= now]
        resting = sorted((a for a in self.addresses if a not in healthy),
                         key=lambda a: self._failed_until[a])
        turn = next(self._turn)
        if healthy:
            start = turn % len(healthy)
            healthy = healthy[start:] + healthy[:start]
        return healthy + resting

    def mark_failed(self, address: str) -> None:
        """Skip this address until the back-off period has passed."""
        self._failed_until[address] = self._clock() + self.backoff_seconds

    def mark_ok(self, address: str) -> None:
        self._failed_until.pop(address, None)

    def resting(self) -> list[str]:
        """Addresses currently in back-off."""
        now = self._clock()
        return [a for a, until in self._failed_until.items() if until > now]


async def failover(upstream: Upstream, send: Callable[[str], Awaitable[T]], *,
                   retry_lost: bool, observe: Observer | None = None) -> T:
    """send(address) on each of the upstream's addresses in turn until one answers.

    Nothing sent (the connection refused, or no free connection in time): the next
    address, the refusing one rested. The connection lost mid-call: the address rested,
    and the next one tried only when `retry_lost` (the call may be repeated safely);
    else Unavailable. Every address failing: Unavailable, with the last reason. Any
    other error of `send` (a timeout once sent, an answer) is the caller's to raise.
    """
    last = ""
    for address in upstream.order():
        try:
            result = await send(address)
        except aiohttp.ConnectionTimeoutError as exc:  # no free connection: nothing sent
            last = f"no connection to {upstream.name} at {address} in time"
            outcome: tuple[str, BaseException] = ("busy", exc)
        except aiohttp.ClientConnectorError as exc:  # refused or unresolvable: nothing sent
            upstream.mark_failed(address)
            last = f"{upstream.name} unreachable at {address}: {exc}"
            outcome = ("unreachable", exc)
        except aiohttp.ClientError as exc:  # lost mid-call
            upstream.mark_failed(address)
            last = f"{upstream.name} at {address} lost the connection: {exc}"
            if observe is not None:
                observe("lost", address, exc)
            if retry_lost:
                continue
            raise Unavailable(last, code=f"{upstream.name}_unavailable") from None
        else:
            upstream.mark_ok(address)
            return result
        if observe is not None:
            observe(outcome[0], address, outcome[1])
    raise Unavailable(last or f"{upstream.name} unavailable", code=f"{upstream.name}_unavailable")
