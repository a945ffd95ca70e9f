"""How matrixd reads vectord's multi-search answer: as dicts (before) or as `Hit` structs.

Builds one answer of N hits as vectord encodes it (MultiSearchResponse), then times, in
this process (best of 5 repeats): decoding it with `Hit` as dicts plus merge.annotate's
copy of each (the old path); decoding it as `Hit` structs plus annotate's conversion to
matrixd's hits (the path now); decoding it as `Hit` structs alone. Asserts the first two
give the same hits.

    .venv/bin/python scripts/bench_wire_decode.py [--hits 10 100]
"""

from __future__ import annotations

import argparse
import random
import sys
import timeit
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from internal.api.vectord import (
    CorpusSearchResult,
    Hit,
    MultiSearchResponse,
    MultiSearchResult,
)

WORDS = "cell protein gene the of expression binding receptor".split()
AS_DICTS = msgspec.json.Decoder(MultiSearchResult[dict[str, Any]])
AS_STRUCTS = msgspec.json.Decoder(MultiSearchResponse)


def answer(n: int) -> bytes:
    """vectord's answer with n hybrid hits of a SciFact-sized text each."""
    rnd = random.Random(1)
    hits = [Hit(id=f"doc-{i}", corpus="scifact", distance=rnd.random(), score=rnd.random(),
                ranks={"vector": i + 1, "lexical": i + 2},
                scores={"vector": rnd.random(), "lexical": rnd.random() * 10},
                text=" ".join(rnd.choice(WORDS) for _ in range(200)), title="A title",
                tags=["a", "b"], metadata={"source": "x", "n": i}, language="english",
                updated_at=datetime.now(UTC), matched_layers=["vector", "lexical"],
                merge_score=rnd.random()) for i in range(n)]
    return msgspec.json.encode(MultiSearchResponse(
        mode="hybrid", hits=hits, took_ms=4.1,
        results=[CorpusSearchResult(corpus="scifact", hits=n, took_ms=3.2)]))


def before(raw: bytes) -> list[dict[str, Any]]:
    return [dict(h) for h in AS_DICTS.decode(raw).hits]


def now(raw: bytes) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = msgspec.to_builtins(AS_STRUCTS.decode(raw).hits)
    return hits


def structs(raw: bytes) -> list[Hit]:
    return AS_STRUCTS.decode(raw).hits


def best(f: Callable[[bytes], object], raw: bytes, reps: int) -> float:
    """µs a call, the best of 5 repeats of reps calls."""
    return min(timeit.repeat(lambda: f(raw), number=reps, repeat=5)) / reps * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hits", type=int, nargs="+", default=[10, 100])
    args = ap.parse_args()
    print("| hits | bytes | dicts + copy (before) µs | Hit structs + annotate's dicts (now) µs "
          "| Hit structs alone µs |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.hits:
        raw = answer(n)
        assert before(raw) == now(raw)
        reps = max(200, 200_000 // n)
        t = [best(f, raw, reps) for f in (before, now, structs)]
        print(f"| {n} | {len(raw):,} | {t[0]:.1f} | {t[1]:.1f} | {t[2]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
