"""How matrixd reads vectord's multi-search answer and writes its hits: dicts or structs.

Builds one answer of N hits as vectord encodes it (MultiSearchResponse), then times, in
this process (best of 5 repeats): decoding it as dicts plus merge.annotate's copy of
each (before) against decoding it straight into matrixd's `RankedHit` structs (now);
and encoding the hits again, as matrixd's answer does, from those dicts against from
those structs. Asserts both give the same bytes.

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

from internal.api.responses import RankedHit
from internal.api.vectord import (
    CorpusSearchResult,
    Hit,
    MultiSearchResponse,
    MultiSearchResult,
)

WORDS = "cell protein gene the of expression binding receptor".split()
AS_DICTS = msgspec.json.Decoder(MultiSearchResult[dict[str, Any]])
AS_STRUCTS = msgspec.json.Decoder(MultiSearchResult[RankedHit])
ENCODER = msgspec.json.Encoder()


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


def as_dicts(raw: bytes) -> list[dict[str, Any]]:
    """Before: JSON objects, copied by annotate, then annotated."""
    hits = [dict(h) for h in AS_DICTS.decode(raw).hits]
    for i, h in enumerate(hits, 1):
        h["corpus_rank"], h["boost_factor"], h["original_distance"] = i, 1.0, h["distance"]
        h["original_merge_score"], h["rank"] = h["merge_score"], i
    return hits


def as_structs(raw: bytes) -> list[RankedHit]:
    """Now: RankedHit structs, annotated in place."""
    hits = AS_STRUCTS.decode(raw).hits
    for i, h in enumerate(hits, 1):
        h.corpus_rank, h.boost_factor, h.original_distance = i, 1.0, h.distance
        h.original_merge_score, h.rank = h.merge_score, i
    return hits


def best(f: Callable[[], object], reps: int) -> float:
    """µs a call, the best of 5 repeats of reps calls."""
    return min(timeit.repeat(f, number=reps, repeat=5)) / reps * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hits", type=int, nargs="+", default=[10, 100])
    args = ap.parse_args()
    print("| hits | answer bytes | read: dicts µs | read: RankedHit µs | write: dicts µs "
          "| write: RankedHit µs |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in args.hits:
        raw = answer(n)
        dicts, structs = as_dicts(raw), as_structs(raw)
        assert ENCODER.encode(dicts) == ENCODER.encode(structs)
        reps = max(200, 200_000 // n)
        t = [best(lambda: as_dicts(raw), reps), best(lambda: as_structs(raw), reps),  # noqa: B023
             best(lambda: ENCODER.encode(dicts), reps),  # noqa: B023
             best(lambda: ENCODER.encode(structs), reps)]  # noqa: B023
        print(f"| {n} | {len(raw):,} | {t[0]:.1f} | {t[1]:.1f} | {t[2]:.1f} | {t[3]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
