"""Client: the blocking face of AsyncClient, driven on a private event loop in a thread.

Each method of Client is the AsyncClient method of the same name, run on the loop and
waited for; so both share one implementation, one session and one set of docstrings,
and a Client works in any thread, and inside a program that runs its own event loop
(a notebook, a web server) too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from lakehouse.aio import AsyncClient

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]
              ) -> Callable[Concatenate[Client, P], T]:
    """Client's version of an AsyncClient method: same arguments, result waited for."""
    @functools.wraps(method)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._wait(method(self._async, *args, **kwargs))

    return call


def _blocking_iter(method: Callable[Concatenate[AsyncClient, P], AsyncGenerator[T, None]]
                   ) -> Callable[Concatenate[Client, P], Iterator[T]]:
    """Client's version of an AsyncClient async generator: a plain iterator."""
    @functools.wraps(method)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._iterate(method(self._async, *args, **kwargs))

    return call


async def _next(agen: AsyncGenerator[T, None]) -> T:
    return await agen.__anext__()


async def _aclose(agen: AsyncGenerator[T, None]) -> None:
    await agen.aclose()


def _shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread,
              client: AsyncClient) -> None:
    """Close the session on its loop, then stop the loop and its thread (idempotent)."""
    if loop.is_closed():
        return
    if thread.is_alive():
        asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
    loop.close()


class Client:
    """Lakehouse's HTTP API, blocking: the same arguments and results as AsyncClient.

    Defaults as AsyncClient (URL and token from $LAKEHOUSE_URL and $LAKEHOUSE_TOKEN,
    else lakehouse.toml). Use it as `with Client() as client:` or call `close()`; one left
    open is closed when it is garbage-collected or at exit. Safe to share between threads.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 0.25,
                 max_wait: float = 60.0, headers: Mapping[str, str] | None = None) -> None:
        self._async = AsyncClient(url, token, timeout=timeout, retries=retries,
                                  backoff=backoff, max_wait=max_wait, headers=headers)
        self.url = self._async.url
        self._loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self._loop.run_forever, name="lakehouse-client",
                                  daemon=True)
        thread.start()
        self._close = weakref.finalize(self, _shutdown, self._loop, thread, self._async)

    @property
    def lsn(self) -> str | None:
        """The WAL position of this client's latest write, sent with every later request
        (read-your-writes on read replicas); None before the first write."""
        return self._async.lsn

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the session and stop the client's thread; it cannot be used afterwards."""
        self._close()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run a coroutine of self._async on the client's loop (async callers await
        `asyncio.wrap_future` of it: the integrations' async path)."""
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("this Lakehouse client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        future = self._submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C): stop the request too
            raise

    def _iterate(self, agen: AsyncGenerator[T, None]) -> Iterator[T]:
        try:
            while True:
                try:
                    item = self._wait(_next(agen))
                except StopAsyncIteration:
                    return
                yield item
        finally:
            if not self._loop.is_closed():
                self._wait(_aclose(agen))

    create_corpus = _blocking(AsyncClient.create_corpus)
    list_corpora = _blocking(AsyncClient.list_corpora)
    get_corpus = _blocking(AsyncClient.get_corpus)
    describe_corpus = _blocking(AsyncClient.describe_corpus)
    corpus_profile = _blocking(AsyncClient.corpus_profile)
    ensure_corpus = _blocking(AsyncClient.ensure_corpus)
    delete_corpus = _blocking(AsyncClient.delete_corpus)
    reembed = _blocking(AsyncClient.reembed)
    convert = _blocking(AsyncClient.convert)
    index_settings = _blocking(AsyncClient.index_settings)
    storage = _blocking(AsyncClient.storage)
    upsert = _blocking(AsyncClient.upsert)
    get_item = _blocking(AsyncClient.get_item)
    delete_item = _blocking(AsyncClient.delete_item)
    delete_items = _blocking(AsyncClient.delete_items)
    add_documents = _blocking(AsyncClient.add_documents)
    get_document = _blocking(AsyncClient.get_document)
    delete_documents = _blocking(AsyncClient.delete_documents)
    iter_documents = _blocking_iter(AsyncClient.iter_documents)
    task = _blocking(AsyncClient.task)
    tasks = _blocking(AsyncClient.tasks)
    wait_task = _blocking(AsyncClient.wait_task)
    iter_ids = _blocking_iter(AsyncClient.iter_ids)
    iter_items = _blocking_iter(AsyncClient.iter_items)
    embed = _blocking(AsyncClient.embed)
    models = _blocking(AsyncClient.models)
    ready = _blocking(AsyncClient.ready)
    request = _blocking(AsyncClient.request)
    search = _blocking(AsyncClient.search)
    smart_search = _blocking(AsyncClient.smart_search)
    search_auto = _blocking(AsyncClient.search_auto)
    answer = _blocking(AsyncClient.answer)
    answer_stream = _blocking_iter(AsyncClient.answer_stream)
    record_answer = _blocking(AsyncClient.record_answer)
    analyze = _blocking(AsyncClient.analyze)
    normalize = _blocking(AsyncClient.normalize)
    record = _blocking(AsyncClient.record)
    wrong = _blocking(AsyncClient.wrong)
    playbooks = _blocking(AsyncClient.playbooks)
    delete_playbook = _blocking(AsyncClient.delete_playbook)
    train_ranker = _blocking(AsyncClient.train_ranker)
    rankers = _blocking(AsyncClient.rankers)
    run_sync = _blocking(AsyncClient.run_sync)
    sync_status = _blocking(AsyncClient.sync_status)
