"""Where a credential's cost is: the CPU each step that differs between an admin token, a
`search` key and a tenant token takes per request, in-process (no stack, no network).

The steps a default search through the gateway runs for its credential: the gateway
resolves it (`Keyring.scope_of`: the key's row is cached between the 0.5 s refreshes, a
tenant token's verification is cached by its text), decides the route, and writes the
scope header; matrixd and vectord each read it and decide again, and matrixd writes it
for vectord; vectord holds each corpus lookup to it and, for a tenant token with a
filter, ANDs the filter into the request. Prints the median of 7 repeats of N calls per
step, in microseconds per request, next to a default search's p50 (scripts/bench_keys.py).

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_keys_cpu.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakehouse  # noqa: E402
from internal.api import keys  # noqa: E402
from internal.api.keys import KeyAuth  # noqa: E402
from internal.api.vectord import MultiSearchRequest  # noqa: E402
from internal.common import access  # noqa: E402
from internal.common.auth import CALLER  # noqa: E402
from internal.gateway.keyauth import Keyring  # noqa: E402
from internal.vectord.search import scoped  # noqa: E402

CORPUS = "bench_keys"


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def at_once(coro: Coroutine[Any, Any, access.Scope | None]) -> access.Scope | None:
    """The coroutine's result when it needs no I/O (the cached row): no event loop's cost."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise RuntimeError("the credential needed I/O: its row was not cached")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    admin = "bench-admin-token-0123456789abcdef"
    key_id, secret = keys.new_secret()
    row = KeyAuth(id=key_id, secret_hash=keys.secret_hash(secret).hex(),
                  signing_key=keys.signing_key(secret).hex(), actions=["search"],
                  corpora=[CORPUS], expires_at=None)
    ring = Keyring((admin,), None)
    # The row as the gateway holds it between two reads from vectord (one per 0.5 s).
    ring._rows[key_id] = (time.monotonic() + 1e9, row)
    tenant = lakehouse.tenant_token(secret, key_id, corpora=[CORPUS], expires_in=7200)
    filtered = lakehouse.tenant_token(secret, key_id, corpora=[CORPUS], expires_in=7200,
                                      filter={"id_prefix": "d"})
    headers = {"admin token": f"Bearer {admin}", "search key": f"Bearer {secret}",
               "tenant token": f"Bearer {tenant}", "tenant + filter": f"Bearer {filtered}"}
    req = MultiSearchRequest(query_text="vector search latency", corpora=[CORPUS], k=10)
    print(f"\nmicroseconds per request (median of 7 x {args.calls} calls), in-process\n")
    print("| credential      | gateway resolves | scope header x2 | decisions x3 | "
          "vectord scope | total |")
    print("|-----------------|-----------------:|----------------:|-------------:|"
          "--------------:|------:|")
    for name, header in headers.items():
        scope = at_once(ring.scope_of(header))
        assert scope is not None, name

        def resolve(h: str = header) -> None:
            at_once(ring.scope_of(h))

        def header_round(s: access.Scope = scope) -> None:
            access.decode(access.encode(s))  # gateway -> matrixd, matrixd -> vectord
            access.decode(access.encode(s))

        def decisions(s: access.Scope = scope) -> None:
            for _ in range(3):  # the gateway, matrixd, vectord
                access.check_request(s, "POST", "/v1/matrix/search")

        def held(s: access.Scope = scope) -> None:
            token = CALLER.set(s)
            try:
                scoped.request(req)
                access.decide(s, "search", [CORPUS])  # Store.corpus: scope.sees
            finally:
                CALLER.reset(token)

        parts = [per_call_us(resolve, args.calls),
                 per_call_us(header_round, args.calls), per_call_us(decisions, args.calls),
                 per_call_us(held, args.calls)]
        print(f"| {name:<15} | {parts[0]:16.1f} | {parts[1]:15.1f} | {parts[2]:12.1f} | "
              f"{parts[3]:13.1f} | {sum(parts):5.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
