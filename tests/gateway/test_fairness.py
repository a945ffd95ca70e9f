"""The fair-shares policy alone (no server): who runs, who waits, who is refused."""

from __future__ import annotations

import pytest

from internal.gateway.fairness import MAX_RETRY_AFTER, FairShares, Shares


def test_a_client_runs_up_to_its_share_then_waits_then_is_refused() -> None:
    fair = FairShares(Shares(total=10, per_client=2, queue=1))
    assert [fair.arrive("a").action for _ in range(4)] == ["run", "run", "wait", "reject"]
    assert fair.load("a") == (2, 1)
    # Another client is not held by the first's queue.
    assert fair.arrive("b").action == "run"


def test_a_freed_place_goes_to_the_oldest_waiter_of_that_client() -> None:
    fair = FairShares(Shares(total=10, per_client=1, queue=5))
    fair.arrive("a")
    first, second = fair.arrive("a"), fair.arrive("a")
    assert fair.release("a", 0.1) == [first.ticket]
    assert fair.release("a", 0.1) == [second.ticket]
    assert fair.release("a", 0.1) == []
    assert fair.load("a") == (0, 0)


def test_places_freed_under_the_total_go_to_clients_in_turn() -> None:
    """A client with a long queue does not take every freed place: the other's one
    waiting request runs at the first place that frees."""
    fair = FairShares(Shares(total=2, per_client=2, queue=10))
    fair.arrive("busy"), fair.arrive("busy")
    busy = [fair.arrive("busy").ticket for _ in range(5)]
    other = fair.arrive("other")
    assert other.action == "wait"
    assert fair.release("busy") == [busy[0]]
    assert fair.release("busy") == [other.ticket]
    assert fair.release("busy") == [busy[1]]


def test_a_client_at_its_own_limit_does_not_block_the_turns_of_others() -> None:
    fair = FairShares(Shares(total=3, per_client=1, queue=5))
    fair.arrive("a")
    a_waits = fair.arrive("a")
    fair.arrive("b"), fair.arrive("c")  # total reached
    d = fair.arrive("d")
    # c ends: a is at its own limit, so d runs.
    assert fair.release("c") == [d.ticket]
    assert fair.release("a") == [a_waits.ticket]


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    fair = FairShares(Shares(total=10, per_client=1, queue=1))
    fair.arrive("a")
    waiting = fair.arrive("a")
    assert fair.arrive("a").action == "reject"
    assert fair.cancel(waiting.ticket) is True
    assert fair.cancel(waiting.ticket) is False
    assert fair.arrive("a").action == "wait"


def test_retry_after_follows_the_clients_time_in_flight() -> None:
    fair = FairShares(Shares(total=10, per_client=2, queue=2))
    for _ in range(4):
        fair.arrive("a")
    started = fair.release("a", 6.0)  # one waiter starts: 2 in flight, 1 waiting
    assert len(started) == 1
    fair.arrive("a")
    refused = fair.arrive("a")
    assert refused.action == "reject"
    # (2 waiting + this one) x 6 s / 2 in flight at once
    assert refused.retry_after == 9
    assert 1 <= fair.retry_after("unknown") <= MAX_RETRY_AFTER


def test_an_idle_client_is_forgotten() -> None:
    fair = FairShares(Shares(total=10, per_client=1, queue=1))
    for n in range(1000):
        fair.arrive(f"c{n}")
        fair.release(f"c{n}")
    assert fair.in_flight == 0
    assert len(fair._clients) == 0


def test_shares_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Shares(total=0, per_client=1, queue=1)


def test_a_light_client_runs_beside_the_places_a_busy_one_holds() -> None:
    """light places: a client with nothing in flight starts at once past the total; a
    second request of it, and freed places, keep to the total."""
    fair = FairShares(Shares(total=2, per_client=8, queue=10, light=1))
    assert [fair.arrive("busy").action for _ in range(3)] == ["run", "run", "wait"]
    assert fair.arrive("light").action == "run"  # in the light place
    assert fair.in_flight == 3 and fair.waiting == 1
    second = fair.arrive("light")
    assert second.action == "wait"  # it has one in flight now: a place like anyone's
    assert fair.arrive("third").action == "wait"  # the light place is taken
    assert fair.release("light") == []  # 3 -> 2 in flight: still the total, no one starts
    assert fair.release("busy") != []  # 2 -> 1: a waiter starts


def test_without_light_places_a_newcomer_waits_for_the_total() -> None:
    fair = FairShares(Shares(total=2, per_client=8, queue=10))
    fair.arrive("busy"), fair.arrive("busy")
    assert fair.arrive("light").action == "wait"
    with pytest.raises(ValueError):
        Shares(total=2, per_client=1, queue=1, light=-1)


def test_clients_seen_lately_share_the_places_evenly() -> None:
    """share_seconds: alone a client has every place; while another has been seen within
    the window each has total // active; the window passed, the first has them again."""
    fair = FairShares(Shares(total=4, per_client=32, queue=10, share_seconds=10))
    assert [fair.arrive("busy", 0).action for _ in range(5)] == ["run"] * 4 + ["wait"]
    assert fair.limit() == 32
    assert fair.arrive("calm", 1).action == "wait"  # every place is taken
    assert fair.limit() == 2
    started = fair.release("busy", 0.1, 1.1)  # busy holds 3: over its 2, calm's turn
    assert len(started) == 1 and fair.load("calm") == (1, 0)
    assert fair.release("busy", 0.1, 1.2) == []  # busy holds 2 with 1 waiting: its share
    fair.release("calm", 0.1, 1.3)
    assert fair.load("busy") == (2, 1) and fair.limit() == 2  # calm seen 0.3 s ago
    assert fair.release("busy", 0.1, 12.0) != []  # calm unseen for 11 s: all places busy's
    assert fair.limit() == 32


def test_a_busy_client_counts_as_seen_however_long_ago_it_came() -> None:
    fair = FairShares(Shares(total=4, per_client=32, queue=10, share_seconds=10))
    fair.arrive("slow", 0)  # one request that runs long
    fair.arrive("other", 0)
    fair.release("other", 0.1, 0.1)
    fair.arrive("third", 30)  # other is forgotten, slow is not: it is in flight
    assert fair.limit() == 2


def test_a_client_alone_has_the_alone_places_until_another_is_seen() -> None:
    """alone: a client alone in the window has `alone` places, more than the total; a
    second client starts at once (the light place beyond the lone client's places) and
    puts the lane back to the total, so the lone client's next requests wait until it
    is within its share; the window passed, it has the alone places again."""
    fair = FairShares(Shares(total=4, per_client=32, queue=20, light=1, share_seconds=10,
                             alone=16))
    assert [fair.arrive("busy", 0).action for _ in range(17)] == ["run"] * 16 + ["wait"]
    assert fair.places() == 16
    assert fair.arrive("calm", 1).action == "run"  # beside 16 in flight, at once
    assert fair.places() == 4 and fair.limit() == 2
    assert fair.arrive("busy", 1).action == "wait"
    for i in range(14):  # busy drains to its share (2) before a waiter of its starts
        assert fair.release("busy", 0.1, 1 + i / 100) == []
    fair.release("calm", 0.1, 1.2)
    assert fair.release("busy", 0.1, 12.0) != []  # calm unseen for 11 s: alone again
    assert fair.places() == 16


def test_alone_places_need_the_window_and_more_than_the_total() -> None:
    assert FairShares(Shares(total=4, per_client=32, queue=1, alone=16)).places() == 4
    fair = FairShares(Shares(total=4, per_client=32, queue=1, share_seconds=10, alone=2))
    assert fair.places() == 4
    with pytest.raises(ValueError):
        Shares(total=2, per_client=1, queue=1, alone=-1)
