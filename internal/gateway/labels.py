"""Which clients the gateway's metrics name: a bounded set of label values. Pure policy:
no I/O, no clock (the caller passes the time).

At most `capacity` clients have a label of their own at once; any other client is counted
under OTHER. A client unseen for `idle_seconds` gives its label back (the metrics drop
its series), so a stack whose clients come and go (addresses with auth off, many keys)
names the ones active now, never more than `capacity`. A label is a key's id, 12 hex
digits of a token's hash or an address (internal.gateway.admission.client_of): never a
secret.
"""

from __future__ import annotations

OTHER = "other"


class ClientLabels:
    """The clients named in metrics (see the module's docstring)."""

    def __init__(self, capacity: int, idle_seconds: float) -> None:
        self.capacity = capacity
        self.idle_seconds = idle_seconds
        self._seen: dict[str, float] = {}  # named client -> when it was last seen

    def label(self, client: str, now: float) -> str:
        """`client`'s own label while it holds one or one is free, else OTHER."""
        if client in self._seen or len(self._seen) < self.capacity:
            self._seen[client] = now
            return client
        return OTHER

    def expire(self, now: float) -> list[str]:
        """The named clients unseen for idle_seconds, their labels given back."""
        gone = [c for c, seen in self._seen.items() if now - seen >= self.idle_seconds]
        for client in gone:
            del self._seen[client]
        return gone

    def __len__(self) -> int:
        return len(self._seen)
