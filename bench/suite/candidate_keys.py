"""Hybrid search's candidate keys: (item id, corpus position) tuples against the
"id\\x00pos" strings a search used before.

The work a search does with its keys, in this process, both ways in the same run
(alternating, best of --repeats): each corpus's vector and BM25 candidates keyed (n each),
the branch lists merged across corpora to the union's top n, fused (the default method,
over both branches and a symbolic score per candidate), and the top k read back as (item
id, position). Microseconds a search per way and their ratio, for one corpus, for 16
holding the union's top n between them (an unfiltered search) and for 16 with n
candidates each (a filtered search).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from bench.harness import Run
from internal.vectord.search import fusion
from internal.vectord.search.union_merge import keyed, top_by_distance, top_by_score

OPTIONS = {"n": 100, "k": 10, "repeats": 7}
QUICK = {"repeats": 3}
SEP = "\x00"


def str_keyed(rows: Iterable[tuple[str, float]], position: int) -> list[tuple[str, float]]:
    suffix = f"{SEP}{position:06d}"
    return [(item_id + suffix, v) for item_id, v in rows]


def str_unkey(k: str) -> tuple[str, int]:
    item_id, _, pos = k.rpartition(SEP)
    return item_id, int(pos)


def corpora(count: int, n: int, rng: random.Random) -> list[Any]:
    """Each corpus's vector (id, distance) and BM25 (id, score) candidates, n each, best
    first; ids of realistic length, half of each list in the other."""
    out = []
    for _ in range(count):
        ids = [f"doc-{rng.randrange(10**9):09d}-{rng.randrange(100)}" for _ in range(max(2, n * 3 // 2))]
        vec = sorted(((i, rng.random()) for i in ids[:n]), key=lambda r: r[1])
        lex = sorted(((i, rng.random() * 20) for i in ids[n // 2:]), key=lambda r: -r[1])
        out.append((vec, lex))
    return out


def one_search(data: list[Any], n: int, k: int, key: Callable[..., list[Any]],
               unkey: Callable[[Any], tuple[str, int]]) -> int:
    vec = top_by_distance([r for pos, (v, _) in enumerate(data) for r in key(v, pos)], n)
    lex = top_by_score([r for pos, (_, lx) in enumerate(data) for r in key(lx, pos)], n)
    sym = {c: 0.5 for c, _ in vec[: n // 4]}
    fused = fusion.fuse("weighted", {fusion.LEXICAL: lex}, symbolic=sym,
                        vector_spaces=[[(c, 1.0 - d) for c, d in vec]], limit=k)
    return sum(unkey(f.id)[1] for f in fused)


def best(fn: Callable[[], Any], repeats: int, inner: int) -> float:
    """Microseconds a call, best of `repeats` runs of `inner` calls."""
    out = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(inner):
            fn()
        out = min(out, (time.perf_counter() - started) / inner)
    return out * 1e6


def main(run: Run) -> None:
    a = run.args
    rng = random.Random(7)
    rows = []
    for count, each in ((1, a.n), (16, a.n // 16), (16, a.n)):
        data = corpora(count, each, rng)
        inner = max(20, 400 * a.n // (count * each))
        ways = {"string": float("inf"), "tuple": float("inf")}
        for _ in range(3):  # alternating, each way's best
            for way, (key, unkey) in (("string", (str_keyed, str_unkey)),
                                      ("tuple", (keyed, lambda c: c))):
                run_one = partial(one_search, data, a.n, a.k, key, unkey)
                ways[way] = min(ways[way], best(run_one, a.repeats, inner))
        rows.append((count, each, ways["string"], ways["tuple"], ways["tuple"] / ways["string"]))
    run.table("the keys' work a search, in-process", ["corpora:d", "candidates each:d",
              "string keys µs:.1f", "tuple keys µs:.1f", "tuple / string:.3f"], rows)
