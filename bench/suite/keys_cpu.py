"""Where a credential's cost is: the CPU each step that differs between an admin token, a
`search` key and a tenant token takes per request, in-process (no stack, no network).

The steps a default search through the gateway runs for its credential: the gateway
resolves it (`Keyring.scope_of`: the key's row cached between refreshes, a tenant token's
verification cached by its text), decides the route and writes the scope header; matrixd
and vectord each read it and decide again; vectord holds each corpus lookup to it and,
for a tenant token with a filter, ANDs the filter into the request. The median of 7
repeats of N calls per step, in microseconds per request (a default search's p50 is in
the `keys` benchmark).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

import lakehouse
from bench.harness import Run
from internal.api import keys
from internal.api.keys import KeyAuth
from internal.api.vectord import MultiSearchRequest
from internal.common import access
from internal.common.auth import CALLER
from internal.gateway.keyauth import Keyring
from internal.vectord.search import scoped

OPTIONS = {"calls": 20000}
QUICK = {"calls": 2000}
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


def main(run: Run) -> None:
    n = run.args.calls
    admin = "bench-admin-token-0123456789abcdef"
    key_id, secret = keys.new_secret()
    row = KeyAuth(id=key_id, secret_hash=keys.secret_hash(secret).hex(),
                  signing_key=keys.signing_key(secret).hex(), actions=["search"],
                  corpora=[CORPUS], expires_at=None)
    ring = Keyring((admin,), None)
    ring._rows[key_id] = (time.monotonic() + 1e9, row)  # as held between two reads
    token = lakehouse.tenant_token
    headers = {"admin token": admin, "search key": secret,
               "tenant token": token(secret, key_id, corpora=[CORPUS], expires_in=7200),
               "tenant + filter": token(secret, key_id, corpora=[CORPUS], expires_in=7200,
                                        filter={"id_prefix": "d"})}
    req = MultiSearchRequest(query_text="vector search latency", corpora=[CORPUS], k=10)
    rows = []
    for name, credential in headers.items():
        header = f"Bearer {credential}"
        scope = at_once(ring.scope_of(header))
        assert scope is not None, name

        def held(s: access.Scope = scope) -> None:
            t = CALLER.set(s)
            try:
                scoped.request(req)
                access.decide(s, "search", [CORPUS])  # Store.corpus: scope.sees
            finally:
                CALLER.reset(t)

        parts = [per_call_us(lambda h=header: at_once(ring.scope_of(h)), n),
                 per_call_us(lambda s=scope: [access.decode(access.encode(s)) for _ in range(2)], n),
                 per_call_us(lambda s=scope: [access.check_request(s, "POST", "/v1/matrix/search")
                                              for _ in range(3)], n),
                 per_call_us(held, n)]
        rows.append((name, *parts, sum(parts)))
    run.table(f"microseconds per request (median of 7 x {n} calls), in-process",
              ["credential", "gateway resolves:.1f", "scope header x2:.1f", "decisions x3:.1f",
               "vectord scope:.1f", "total:.1f"], rows)
