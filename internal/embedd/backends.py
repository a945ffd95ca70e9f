"""The embedding backends embedd can serve: local ONNX, Ollama, OpenAI-compatible.

Each takes texts that already carry any input_type prefix and returns L2-normalised
vectors in order. Remote failures become UpstreamError (502, the upstream's words)
or UpstreamTimeout (504).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import aiohttp
import httpx
import msgspec
import numpy as np
import ollama

from internal.common.errors import UpstreamError, UpstreamTimeout
from internal.common.openai_compat import endpoint, error_message
from internal.config import EmbeddConfig
from internal.embedd.catalog import SPECS
from internal.embedd.coalesce import Coalescer, Embedded, Lane, LaneStats
from internal.embedd.local import Encoded, LocalModel


class EmbedModel(Protocol):
    """A local model: its id and dimension, and `embed` (blocking, thread-safe)."""

    id: str
    dim: int

    def embed(self, texts: list[str]) -> Encoded: ...


class Backend(ABC):
    kind: str  # local | ollama | openai
    model: str
    dim: int | None  # None until a remote model's first answer tells us
    # The model id whose vectors replace this one's: corpora of this id are moved to it
    # (vectord re-embeds them); None: nothing replaces it.
    superseded_by: str | None = None
    # ISO 639-1 codes of the languages its vectors are trained for (None: not known, as
    # for a remote model) and the text put before an input of each input_type.
    languages: tuple[str, ...] | None = None
    prefixes: Mapping[str, str] = {}

    def prefix(self, input_type: str) -> str:
        """Text put before each input for this input_type ("" for most models)."""
        return self.prefixes.get(input_type, "")

    @abstractmethod
    async def embed(self, texts: list[str], lane: Lane = Lane.BULK) -> Embedded: ...

    def lanes(self) -> dict[str, dict[str, object]]:
        """Per lane: texts waiting, calls made, the longest wait and model call."""
        return {}

    async def close(self) -> None:
        return None

    def _check(self, rows: list[list[float]], n: int) -> Encoded:
        """Validate a remote answer's shape and dimension, then L2-normalise it."""
        if len(rows) != n:
            raise UpstreamError(f"{self.kind}: asked for {n} embeddings, got {len(rows)}")
        try:
            arr = np.asarray(rows, dtype=np.float32)
        except ValueError:
            raise UpstreamError(f"{self.kind}: embeddings of different lengths") from None
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise UpstreamError(f"{self.kind}: answer holds no embeddings")
        if self.dim is None:
            self.dim = int(arr.shape[1])
        elif arr.shape[1] != self.dim:
            raise UpstreamError(
                f"{self.kind}: model {self.model!r} returned {arr.shape[1]}-d vectors, "
                f"configured dim is {self.dim}")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        if not np.all(np.isfinite(arr)) or np.any(norms == 0):
            raise UpstreamError(f"{self.kind}: answer holds a zero or non-finite vector")
        return Encoded((arr / norms).astype(np.float32), [])


def nice_thread(increment: int) -> Callable[[], None]:
    """A thread initializer lowering the thread's own OS priority by increment (Linux
    schedules threads one by one; elsewhere a no-op). Never raised back: an unprivileged
    process cannot, so the lower-priority threads are an executor of their own."""

    def init() -> None:
        if increment > 0 and hasattr(os, "setpriority") and sys.platform == "linux":
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + increment)

    return init


class LocalBackend(Backend):
    """A local model (all-MiniLM-L6-v2 in one numerics, or multilingual-e5-small), calls
    coalesced across requests, run in threads: `workers` shared threads (bulk at a lower
    OS priority) and `interactive_workers` threads that serve questions only."""

    kind = "local"

    def __init__(self, model: EmbedModel, executors: list[ThreadPoolExecutor],
                 coalescer: Coalescer) -> None:
        self.local = model
        self.model = model.id
        self.dim = model.dim
        spec = SPECS[model.id]
        self.languages, self.prefixes = spec.languages, spec.prefixes
        self._executors = executors
        self.coalescer = coalescer

    @classmethod
    async def open(cls, cfg: EmbeddConfig, numerics: str | None = None,
                   load: Callable[[int], EmbedModel] | None = None) -> LocalBackend:
        """Load the model in a thread so the event loop keeps serving: load(threads),
        else MiniLM in numerics (the configured one when None)."""
        shared = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="embed",
                                    initializer=nice_thread(cfg.bulk_nice))
        executors = [shared]
        reserved = None
        if cfg.interactive_workers:
            reserved = ThreadPoolExecutor(max_workers=cfg.interactive_workers,
                                          thread_name_prefix="embed-interactive")
            executors.append(reserved)
        loop = asyncio.get_running_loop()
        # Building the integer model when it is missing takes a second or two, once.
        if load is None:
            load = functools.partial(LocalModel, numerics=numerics or cfg.local_numerics)
        model = await loop.run_in_executor(reserved or shared, load, cfg.threads)
        coalescer = Coalescer(model.embed, shared, batch_size=cfg.batch_size,
                              max_wait=cfg.max_wait_ms / 1000.0, workers=cfg.workers,
                              reserved=cfg.interactive_workers, reserved_executor=reserved)
        return cls(model, executors, coalescer)

    async def embed(self, texts: list[str], lane: Lane = Lane.BULK) -> Embedded:
        return await self.coalescer.embed(texts, lane)

    def lanes(self) -> dict[str, dict[str, object]]:
        co = self.coalescer
        return {lane.value: co.stats[lane].as_dict(co.pending(lane)) for lane in Lane}

    async def close(self) -> None:
        await self.coalescer.close()
        for ex in self._executors:
            ex.shutdown(wait=True)


class LazyBackend(Backend):
    """A backend opened at its first call: a model kept for data embedded before, whose
    memory and threads are spent only when some corpus still asks for it (a local model:
    its languages and prefixes are declared, known before it opens)."""

    def __init__(self, kind: str, model: str, dim: int | None,
                 opener: Callable[[], Awaitable[Backend]],
                 superseded_by: str | None = None) -> None:
        self.kind, self.model, self.dim = kind, model, dim
        self.superseded_by = superseded_by
        spec = SPECS.get(model)
        if spec is not None:
            self.languages, self.prefixes = spec.languages, spec.prefixes
        self._opener = opener
        self._opening = asyncio.Lock()
        self.opened: Backend | None = None

    async def _backend(self) -> Backend:
        if self.opened is None:
            async with self._opening:
                if self.opened is None:
                    self.opened = await self._opener()
        return self.opened

    async def embed(self, texts: list[str], lane: Lane = Lane.BULK) -> Embedded:
        return await (await self._backend()).embed(texts, lane)

    def lanes(self) -> dict[str, dict[str, object]]:
        return {} if self.opened is None else self.opened.lanes()

    async def close(self) -> None:
        if self.opened is not None:
            await self.opened.close()


class RemoteLanes:
    """Per-lane concurrency towards a remote backend: questions have slots of their own,
    so a bulk request holding every bulk slot never holds a question."""

    def __init__(self, cfg: EmbeddConfig) -> None:
        self._slots = {Lane.INTERACTIVE: asyncio.Semaphore(cfg.remote_interactive_concurrency),
                       Lane.BULK: asyncio.Semaphore(cfg.remote_bulk_concurrency)}
        self._waiting = dict.fromkeys(Lane, 0)
        self.stats = {lane: LaneStats() for lane in Lane}

    async def run(self, lane: Lane, call: Callable[[], Awaitable[Encoded]], n: int) -> Embedded:
        """call() once a slot of lane is free; n is its number of texts."""
        stats = self.stats[lane]
        enqueued = time.monotonic()
        self._waiting[lane] += n
        try:
            await self._slots[lane].acquire()
        finally:
            self._waiting[lane] -= n
        start = time.monotonic()
        stats.started(start, [enqueued] * n)
        try:
            return Embedded(await call(), start - enqueued)
        finally:
            stats.call_max_s = max(stats.call_max_s, time.monotonic() - start)
            self._slots[lane].release()

    def as_dict(self) -> dict[str, dict[str, object]]:
        return {lane.value: self.stats[lane].as_dict(self._waiting[lane]) for lane in Lane}


class OllamaBackend(Backend):
    """The ollama package's AsyncClient: POST {host}/api/embed."""

    kind = "ollama"

    def __init__(self, cfg: EmbeddConfig) -> None:
        self.model = cfg.ollama_model
        self.dim = cfg.ollama_dim or None
        self._prefixes = {"query": cfg.ollama_query_prefix,
                          "document": cfg.ollama_document_prefix}
        self._client = ollama.AsyncClient(host=cfg.ollama_host, timeout=cfg.timeout_seconds)
        self.host = cfg.ollama_host
        self._lanes = RemoteLanes(cfg)

    def prefix(self, input_type: str) -> str:
        return self._prefixes.get(input_type, "")

    async def embed(self, texts: list[str], lane: Lane = Lane.BULK) -> Embedded:
        return await self._lanes.run(lane, lambda: self._embed(texts), len(texts))

    def lanes(self) -> dict[str, dict[str, object]]:
        return self._lanes.as_dict()

    async def _embed(self, texts: list[str]) -> Encoded:
        try:
            resp = await self._client.embed(model=self.model, input=texts)
        except ollama.ResponseError as exc:
            raise UpstreamError(f"ollama: {exc.error} (HTTP {exc.status_code})") from None
        except httpx.TimeoutException:
            raise UpstreamTimeout(f"ollama at {self.host} did not answer in time") from None
        except (ConnectionError, httpx.HTTPError) as exc:
            raise UpstreamError(f"ollama at {self.host}: {exc}") from None
        return self._check([list(v) for v in resp.embeddings], len(texts))

    async def close(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]


def openai_embeddings_url(base_url: str) -> str:
    """Where an OpenAI-compatible server's embeddings are (openai_compat.endpoint)."""
    return endpoint(base_url, "embeddings")


class OpenAIBackend(Backend):
    """Any OpenAI-compatible server: POST /v1/embeddings, optional bearer key."""

    kind = "openai"

    def __init__(self, cfg: EmbeddConfig, session: aiohttp.ClientSession) -> None:
        self.model = cfg.openai_model
        self.dim = cfg.openai_dim or None
        self.url = openai_embeddings_url(cfg.openai_base_url)
        self._headers = {"Content-Type": "application/json"}
        if cfg.openai_api_key:
            self._headers["Authorization"] = f"Bearer {cfg.openai_api_key}"
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=cfg.timeout_seconds)
        self._lanes = RemoteLanes(cfg)

    async def embed(self, texts: list[str], lane: Lane = Lane.BULK) -> Embedded:
        return await self._lanes.run(lane, lambda: self._embed(texts), len(texts))

    def lanes(self) -> dict[str, dict[str, object]]:
        return self._lanes.as_dict()

    async def _embed(self, texts: list[str]) -> Encoded:
        body = msgspec.json.encode({"model": self.model, "input": texts,
                                    "encoding_format": "float"})
        try:
            async with self._session.post(self.url, data=body, headers=self._headers,
                                          timeout=self._timeout) as resp:
                raw = await resp.read()
                status = resp.status
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"openai at {self.url} did not answer in time") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"openai at {self.url}: {exc}") from None
        try:
            payload: Any = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            payload = None
        if status >= 400:
            raise UpstreamError(f"openai: {error_message(payload, raw)} (HTTP {status})")
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise UpstreamError("openai: answer has no data list")
        try:
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            rows = [list(d["embedding"]) for d in ordered]
        except (AttributeError, KeyError, TypeError, ValueError):
            raise UpstreamError("openai: malformed data items (need index and embedding)") from None
        return self._check(rows, len(texts))

