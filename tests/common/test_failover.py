"""The one failover loop (internal.common.upstream.failover), shared by the gateway's
proxy and the daemon-to-daemon clients: what is tried again, on which address, and what
reaches the caller."""

from __future__ import annotations

from types import SimpleNamespace

import aiohttp
import pytest

from internal.common.errors import Unavailable, UpstreamTimeout
from internal.common.upstream import Upstream, failover

A, B = "http://a", "http://b"


def refused() -> aiohttp.ClientConnectorError:
    key = SimpleNamespace(host="a", port=1, ssl=None)
    return aiohttp.ClientConnectorError(key, OSError(111, "refused"))  # type: ignore[arg-type]


def script(**by_address: BaseException | str):  # type: ignore[no-untyped-def]
    """send(address): raises what the address is given, or answers its string."""
    tried: list[str] = []

    async def send(address: str) -> str:
        tried.append(address)
        what = by_address[address.removeprefix("http://")]
        if isinstance(what, BaseException):
            raise what
        return what

    return send, tried


async def test_refused_goes_to_the_next_address_and_rests_the_first() -> None:
    up = Upstream("vectord", [A, B], backoff_seconds=60)
    send, tried = script(a=refused(), b="ok")
    seen: list[tuple[str, str]] = []
    got = await failover(up, send, retry_lost=False,
                         observe=lambda outcome, address, _: seen.append((outcome, address)))
    assert got == "ok" and tried == [A, B] and seen == [("unreachable", A)]
    assert up.resting() == [A] and up.order() == [B, A]


async def test_no_free_connection_goes_on_without_resting() -> None:
    up = Upstream("vectord", [A, B], backoff_seconds=60)
    send, tried = script(a=aiohttp.ConnectionTimeoutError(), b="ok")
    assert await failover(up, send, retry_lost=False) == "ok"
    assert tried == [A, B] and up.resting() == []


@pytest.mark.parametrize("retry_lost", [True, False])
async def test_a_lost_connection_is_tried_again_only_when_safe(retry_lost: bool) -> None:
    up = Upstream("vectord", [A, B], backoff_seconds=60)
    send, tried = script(a=aiohttp.ServerDisconnectedError(), b="ok")
    if retry_lost:
        assert await failover(up, send, retry_lost=True) == "ok"
        assert tried == [A, B]
    else:
        with pytest.raises(Unavailable) as err:
            await failover(up, send, retry_lost=False)
        assert err.value.code == "vectord_unavailable" and tried == [A]
    assert up.resting() == [A]


async def test_every_address_failing_is_unavailable_with_the_last_reason() -> None:
    up = Upstream("embedd", [A, B], backoff_seconds=60)
    send, _ = script(a=refused(), b=refused())
    with pytest.raises(Unavailable) as err:
        await failover(up, send, retry_lost=True)
    assert err.value.code == "embedd_unavailable" and "unreachable at http://" in str(err.value)


async def test_other_errors_reach_the_caller_untouched() -> None:
    up = Upstream("vectord", [A, B], backoff_seconds=60)
    send, tried = script(a=UpstreamTimeout("slow"), b="ok")
    with pytest.raises(UpstreamTimeout):
        await failover(up, send, retry_lost=True)
    assert tried == [A] and up.resting() == []
