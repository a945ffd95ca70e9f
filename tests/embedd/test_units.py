"""The I/O-free parts: the LRU cache and how the coalescer picks a batch."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from internal.common import priority
from internal.embedd.cache import LRUCache, key
from internal.embedd.coalesce import Coalescer, Lane
from internal.embedd.local import Encoded


def test_lru_evicts_least_recently_used() -> None:
    cache = LRUCache(2)
    a, b, c = key("m", "a"), key("m", "b"), key("m", "c")
    cache.put(a, np.ones(3, dtype=np.float32), False)
    cache.put(b, np.zeros(3, dtype=np.float32), True)
    assert cache.get(a) is not None  # a is now the most recent
    cache.put(c, np.ones(3, dtype=np.float32), False)
    assert cache.get(b) is None and cache.get(a) is not None and len(cache) == 2
    entry = cache.get(a)
    assert entry is not None and not entry.vector.flags.writeable


def test_cache_key_separates_models_and_texts() -> None:
    assert key("m1", "t") != key("m2", "t")
    assert key("m1", "t") != key("m1", "t ")
    assert key("m1", "t") == key("m1", "t")


def test_cache_size_zero_stores_nothing() -> None:
    cache = LRUCache(0)
    cache.put(key("m", "a"), np.ones(3, dtype=np.float32), False)
    assert len(cache) == 0


def fake_model(texts: list[str]) -> Encoded:
    """Vector = [len(text)] so results can be traced to their text."""
    return Encoded(np.array([[float(len(t))] for t in texts], dtype=np.float32),
                   [i for i, t in enumerate(texts) if len(t) > 10])


async def test_coalescer_batches_sorted_and_keeps_order() -> None:
    seen: list[list[str]] = []

    def run(texts: list[str]) -> Encoded:
        seen.append(texts)
        return fake_model(texts)

    with ThreadPoolExecutor(1) as ex:
        co = Coalescer(run, ex, batch_size=4, max_wait=0.01, workers=1)
        texts = ["x" * n for n in (12, 1, 7, 3, 9, 2, 11, 5, 4)]
        results = await asyncio.gather(co.embed(texts[:5]), co.embed(texts[5:]))
        await co.close()
    got = [float(v[0]) for r in results for v in r.encoded.vectors]
    assert got == [float(len(t)) for t in texts]
    assert results[0].encoded.truncated == [0] and results[1].encoded.truncated == [1]
    assert all(len(b) <= 4 for b in seen) and len(seen) < len(texts)
    assert all(b == sorted(b, key=len) for b in seen)


async def test_coalescer_failure_reaches_every_waiter() -> None:
    def boom(texts: list[str]) -> Encoded:
        raise RuntimeError("model exploded")

    with ThreadPoolExecutor(1) as ex:
        co = Coalescer(boom, ex, batch_size=8, max_wait=0.0, workers=1)
        results = await asyncio.gather(co.embed(["a"]), co.embed(["b"]), return_exceptions=True)
        await co.close()
    assert all(isinstance(r, RuntimeError) for r in results)


def in_order(order: list[str]) -> Callable[[list[str]], Encoded]:
    """A model call of 10 ms that notes its texts in `order`."""
    def run(texts: list[str]) -> Encoded:
        time.sleep(0.01)
        order.extend(texts)
        return fake_model(texts)

    return run


async def test_coalescer_serves_interactive_before_queued_bulk() -> None:
    order: list[str] = []
    run = in_order(order)

    with ThreadPoolExecutor(1) as ex:
        co = Coalescer(run, ex, batch_size=1, max_wait=0.0, workers=1)
        bulk = asyncio.create_task(co.embed([f"doc{i}" for i in range(20)], Lane.BULK))
        await asyncio.sleep(0.03)  # a few documents are through, the rest are queued
        asked = await co.embed(["question"], Lane.INTERACTIVE)
        await bulk
        await co.close()
    at = order.index("question")
    assert 0 < at < 10, order  # it jumped the queued documents
    assert co.stats[Lane.INTERACTIVE].calls == 1 and co.stats[Lane.BULK].texts == 20
    # it waited for the one call in flight at most, not for the queue
    assert asked.wait_s <= co.stats[Lane.BULK].call_max_s + 0.01


async def test_reserved_worker_serves_questions_only_and_takes_them_when_idle() -> None:
    """The reserved worker never embeds documents; while it waits, a question is its: the
    shared worker (a lower OS priority) keeps on the documents instead of taking it."""
    threads: dict[str, set[str]] = {"bulk": set(), "question": set()}

    def run(texts: list[str]) -> Encoded:
        time.sleep(0.005)
        kind = "question" if texts[0].startswith("q") else "bulk"
        threads[kind].add(threading.current_thread().name)
        return fake_model(texts)

    with ThreadPoolExecutor(1, thread_name_prefix="shared") as shared, \
            ThreadPoolExecutor(1, thread_name_prefix="reserved") as reserved:
        co = Coalescer(run, shared, batch_size=1, max_wait=0.0, workers=1,
                       reserved=1, reserved_executor=reserved)
        await asyncio.sleep(0.01)  # the workers are up and waiting
        bulk = asyncio.create_task(co.embed([f"doc{i}" for i in range(30)], Lane.BULK))
        for i in range(5):
            await co.embed([f"q{i}"], Lane.INTERACTIVE)
        await bulk
        await co.close()
    assert threads["question"] and all(n.startswith("reserved") for n in threads["question"])
    assert all(name.startswith("shared") for name in threads["bulk"])


async def test_a_light_clients_question_is_embedded_before_the_others_waiting() -> None:
    order: list[str] = []
    run = in_order(order)

    async def light(text: str) -> None:
        priority.PRIORITY.set(priority.LIGHT)  # as embedd's middleware does for the request
        await co.embed([text], Lane.INTERACTIVE)

    with ThreadPoolExecutor(1) as ex:
        co = Coalescer(run, ex, batch_size=1, max_wait=0.0, workers=1)
        busy = [asyncio.create_task(co.embed([f"q{i}"], Lane.INTERACTIVE)) for i in range(6)]
        await asyncio.sleep(0)  # the busy client's questions are queued
        await asyncio.create_task(light("light"))
        await asyncio.gather(*busy)
        await co.close()
    assert order.index("light") <= 1, order  # after the call in flight at most
