"""Which clients the gateway's metrics name (no server): a bounded set, freed when idle."""

from __future__ import annotations

from internal.gateway.labels import OTHER, ClientLabels


def test_at_most_capacity_clients_are_named_the_rest_are_other() -> None:
    labels = ClientLabels(capacity=2, idle_seconds=60)
    assert labels.label("k:a", 0) == "k:a"
    assert labels.label("k:b", 1) == "k:b"
    assert labels.label("k:c", 2) == OTHER
    assert labels.label("k:a", 3) == "k:a"  # a named client keeps its label
    assert len(labels) == 2


def test_an_idle_client_gives_its_label_back() -> None:
    labels = ClientLabels(capacity=2, idle_seconds=60)
    labels.label("k:a", 0)
    labels.label("k:b", 50)
    assert labels.expire(59) == []
    assert labels.expire(60) == ["k:a"]  # unseen for 60 s
    assert labels.label("k:c", 61) == "k:c"  # the freed label goes to the next client
    assert labels.label("k:a", 62) == OTHER
