"""One corpus's part of a search (`Outcome`), run with its failure kept on it; what the
caller adds to the union of corpora (`Federation`: corpus weights, `include`, the
playbook's factors); and the loops every search path shares: each corpus concurrently
(`each`), the top k plus every included item (`keep`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import psycopg

from internal.api.vectord import Corpus, Hit
from internal.pg.replicas import ReplicaFailed
from internal.vectord.search import query_vectors
from internal.vectord.search.options import Options
from internal.vectord.search.selection import Choice
from internal.vectord.storage.store import Store, registry_moved

T = TypeVar("T")
U = TypeVar("U")
R = TypeVar("R")


@dataclass
class Outcome:
    """One corpus of a search: resolved, failed (error kept), timed, hits it placed."""

    name: str
    position: int
    corpus: Corpus | None = None
    error: Exception | None = None
    took_ms: float = 0.0
    hits: int = 0
    skipped: str | None = None  # why no query vector fits its space (query_vectors)
    selection: Choice | None = None  # resource selection's score, weight and evidence


@dataclass(frozen=True)
class Federation:
    """What the caller adds to the union of corpora, by corpus name: the corpus weights
    (after fusion), the `include` ids (scored as candidates whatever retrieval finds), and
    (corpus, id) -> the playbook's factor (hybrid: applied inside the fusion)."""

    weights: dict[str, float] = field(default_factory=dict)
    include: dict[str, list[str]] = field(default_factory=dict)
    factors: dict[tuple[str, str], float] = field(default_factory=dict)
    # Resource selection (search/selection.py) weighs the corpora no weight names.
    select: bool = False

    def weight(self, o: Outcome) -> float:
        return self.weights.get(o.name, 1.0)

    def weighs_all_one(self, outcomes: Iterable[Outcome]) -> bool:
        return all(self.weights.get(o.name, 1.0) == 1.0 for o in outcomes)


def ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


async def on(store: Store, o: Outcome, fn: Callable[[Corpus], Awaitable[T]]) -> T | None:
    """fn on the outcome's corpus, timed; a failure is kept on the outcome (None returned).

    A table dropped by another replica shows as UndefinedTable: re-read the registry once.
    """
    started = time.perf_counter()
    try:
        if o.corpus is None:
            o.corpus = await store.corpus(o.name)
        try:
            return await fn(o.corpus)
        except (psycopg.errors.UndefinedTable, psycopg.errors.DataException) as exc:
            if not registry_moved(exc):
                raise
            if store.replicas is not None and store.replicas.on_replica():
                raise  # a standby behind the registry: the search runs on the primary
            o.corpus = await store.corpus(o.name, fresh=True)
            return await fn(o.corpus)
    except ReplicaFailed:
        raise  # the whole search runs again on the primary (Store.read_search)
    except psycopg.errors.UndefinedTable as exc:
        if store.replicas is not None and store.replicas.on_replica():
            raise
        o.error = exc
        return None
    except Exception as exc:  # kept for this corpus; the others still answer
        o.error = exc
        return None
    finally:
        o.took_ms = round(o.took_ms + ms(started), 3)


async def side_by_side(a: Awaitable[T], b: Awaitable[U]) -> tuple[T, U]:
    """Both results, run concurrently; the first failure is raised as it is (not as an
    ExceptionGroup) once the other has been cancelled and has finished."""
    ta, tb = asyncio.ensure_future(a), asyncio.ensure_future(b)
    try:
        return await ta, await tb
    except BaseException:
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)
        raise


async def each(store: Store, outcomes: Sequence[Outcome],
                fn: Callable[[Corpus], Awaitable[T]]) -> list[tuple[Outcome, T]]:
    """fn on every corpus not failed yet, concurrently; the results of those that answered."""
    live = [o for o in outcomes if o.error is None]
    # One corpus (the usual search): awaited as it is, no task to schedule and gather.
    results = ([await on(store, live[0], fn)] if len(live) == 1
               else await asyncio.gather(*(on(store, o, fn) for o in live)))
    return [(o, r) for o, r in zip(live, results, strict=True)
            if o.error is None and r is not None]


def choose(p: Options, o: Outcome, corpus: Corpus) -> query_vectors.Choice:
    """The corpus's query vector and space; a skip is noted on its outcome."""
    choice = query_vectors.choose(corpus, p.query_vector, p.query_vectors)
    o.skipped = choice.skipped
    return choice


Member = tuple[int, Corpus, list[float], int]  # position, corpus, query vector, its space


def keep(ranked: Iterable[R], k: int, included: Callable[[R], bool]) -> list[R]:
    """The first k of a ranked list, plus every included entry wherever it ranks (the
    one loop of every mode: `include` items are returned even below the top k)."""
    out: list[R] = []
    natural = 0
    for r in ranked:
        if included(r):
            out.append(r)
        elif natural < k:
            out.append(r)
            natural += 1
    return out


def keep_hits(ranked: Sequence[Hit], k: int, inc: dict[str, list[str]]) -> list[Hit]:
    """keep over hits: an included hit is one marked so or one `include` asked for."""
    return keep(ranked, k, lambda h: h.included or h.id in inc.get(h.corpus, ()))


async def resolved(corpus: Corpus) -> Corpus:
    """Nothing but the registry lookup on makes first: a missing corpus fails here."""
    return corpus
