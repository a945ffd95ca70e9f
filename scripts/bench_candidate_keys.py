"""Hybrid search's candidate keys: (item id, corpus position) tuples against "id\\x00pos" strings.

The work a search does with its keys, in this process, both ways in the same run
(alternating, best of --repeats): each corpus's vector and BM25 candidates keyed (n
each), the branch lists merged across corpora to the union's top n, fused (the default
method, the weighted one, over both branches and a symbolic score per candidate), and
the top k read back as (item id, position). Prints microseconds a search per way and
their ratio, for one corpus (the usual search), for 16 holding the union's top n between
them (what a space's shared index and the in-memory BM25 give an unfiltered search) and
for 16 with n candidates each (each corpus's own statement: a filtered search).

    .venv/bin/python scripts/bench_candidate_keys.py [--n 100] [--k 10] [--repeats 7]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from internal.vectord.search import fusion
from internal.vectord.search.union_merge import (
    keyed,
    top_by_distance,
    top_by_score,
)

SEP = "\x00"


def str_keyed(rows: Iterable[tuple[str, float]], position: int) -> list[tuple[str, float]]:
    """The string keys a search used before: the id, NUL, the position in six digits."""
    suffix = f"{SEP}{position:06d}"
    return [(item_id + suffix, v) for item_id, v in rows]


def str_unkey(k: str) -> tuple[str, int]:
    item_id, _, pos = k.rpartition(SEP)
    return item_id, int(pos)


def corpora(count: int, n: int, rng: random.Random) -> list[tuple[list[tuple[str, float]],
                                                                   list[tuple[str, float]]]]:
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
    vec_parts = [key(v, pos) for pos, (v, _) in enumerate(data)]
    lex_parts = [key(lx, pos) for pos, (_, lx) in enumerate(data)]
    vec = top_by_distance([r for p in vec_parts for r in p], n)
    lex = top_by_score([r for p in lex_parts for r in p], n)
    sym = {c: 0.5 for c, _ in vec[: n // 4]}
    fused = fusion.fuse("weighted", {fusion.LEXICAL: lex}, symbolic=sym,
                        vector_spaces=[[(c, 1.0 - d) for c, d in vec]], limit=k)
    got = 0
    for f in fused:
        _, pos = unkey(f.id)
        got += pos
    return got


def best(fn: Callable[[], Any], repeats: int, inner: int) -> float:
    """Microseconds a call, best of `repeats` runs of `inner` calls."""
    out = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(inner):
            fn()
        out = min(out, (time.perf_counter() - started) / inner)
    return out * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(7)
    print("| corpora | candidates each | string keys µs | tuple keys µs | tuple / string |")
    print("|---:|---:|---:|---:|---:|")
    for count, each in ((1, args.n), (16, args.n // 16), (16, args.n)):
        data = corpora(count, each, rng)
        inner = max(20, 400 * args.n // (count * each))
        ways: dict[str, float] = {"string": float("inf"), "tuple": float("inf")}
        for _ in range(3):  # alternating, each way's best
            for way, (key, unkey) in (("string", (str_keyed, str_unkey)),
                                      ("tuple", (keyed, lambda c: c))):
                run = partial(one_search, data, args.n, args.k, key, unkey)
                ways[way] = min(ways[way], best(run, args.repeats, inner))
        print(f"| {count} | {each} | {ways['string']:.1f} | {ways['tuple']:.1f} | "
              f"{ways['tuple'] / ways['string']:.3f} |")


if __name__ == "__main__":
    main()
