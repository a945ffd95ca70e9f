"""How matrixd reads vectord's multi-search answer and writes its hits: dicts or structs.

One answer of N hits as vectord encodes it (MultiSearchResponse), then, in this process
(best of 5 repeats): decoding it as dicts plus merge.annotate's copy of each (before)
against decoding it straight into matrixd's `RankedHit` structs (now); and encoding the
hits again, as matrixd's answer does, from each. Both give the same bytes (checked).
"""

from __future__ import annotations

import random
import timeit
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from bench.harness import Run
from internal.api.responses import RankedHit
from internal.api.vectord import CorpusSearchResult, Hit, MultiSearchResponse, MultiSearchResult

OPTIONS = {"hits": ([10, 100], "hit counts (repeatable)")}
QUICK: dict[str, Any] = {}
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
    hits = [dict(h) for h in AS_DICTS.decode(raw).hits]
    for i, h in enumerate(hits, 1):
        h["corpus_rank"], h["boost_factor"], h["original_distance"] = i, 1.0, h["distance"]
        h["original_merge_score"], h["rank"] = h["merge_score"], i
    return hits


def as_structs(raw: bytes) -> list[RankedHit]:
    hits = AS_STRUCTS.decode(raw).hits
    for i, h in enumerate(hits, 1):
        h.corpus_rank, h.boost_factor, h.original_distance = i, 1.0, h.distance
        h.original_merge_score, h.rank = h.merge_score, i
    return hits


def best(f: Callable[[], object], reps: int) -> float:
    """µs a call, the best of 5 repeats of reps calls."""
    return min(timeit.repeat(f, number=reps, repeat=5)) / reps * 1e6


def main(run: Run) -> None:
    rows = []
    for n in run.args.hits or [10, 100]:
        n = int(n)
        raw = answer(n)
        dicts, structs = as_dicts(raw), as_structs(raw)
        assert ENCODER.encode(dicts) == ENCODER.encode(structs)
        reps = max(200, 200_000 // n)
        rows.append((n, len(raw), best(lambda r=raw: as_dicts(r), reps),
                     best(lambda r=raw: as_structs(r), reps),
                     best(lambda d=dicts: ENCODER.encode(d), reps),
                     best(lambda s=structs: ENCODER.encode(s), reps)))
    run.table("matrixd's read and write of an answer, in-process",
              ["hits:d", "answer bytes:,", "read: dicts µs:.1f", "read: RankedHit µs:.1f",
               "write: dicts µs:.1f", "write: RankedHit µs:.1f"], rows)
