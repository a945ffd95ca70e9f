"""The ingest pipeline: documents in, a corpus that holds them out.

What changed is decided by content hashes (`changed`: a document whose hash equals the
stored one's is not embedded again). The rest goes in batches: embedded (documents;
with the pipeline's model, or embedd's default), upserted with the model's label, a
batch at a time per worker. A refusal that blames the input (`blames_input`: a 4xx
other than auth, missing, slow, conflict or rate limit) costs only the document or
group it names (`items[3]`, `texts[3]`), or, when it names none, the batch is sent
again group by group; the group (a page of syncd's; otherwise the document) is
reported failed and the rest goes in. Any other failure is the stack's: the run stops
(`StackFailure`, the report kept on the pipeline), or with stop_on_stack_failure off
the batch's groups are reported failed and the run goes on. A call answered 429 (past
the client's share of the gateway) waits the answer's Retry-After and is sent again, and
the next batches are half as large (down to 1); after a few batches answered without
one they grow back towards `batch`. An upsert refused because the corpus changed model
meanwhile (409 `model_mismatch`: a re-embedding switched it) is embedded again by the
corpus's model now (`model_of`) and sent once more. Stale ids are deleted
after the writes (`delete_stale`), and never those of a group that failed, so a page
whose new content did not go in keeps its old content.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol, TypeVar

import aiohttp

from internal.api.vectord import Item, embed_text
from internal.common.errors import (
    LakehouseError,
    TooManyRequests,
    UpstreamError,
    blames_input,
    describe,
)
from internal.common.hashing import content_hash

T = TypeVar("T")
DELETE_BATCH = 1000  # ids per delete call
RATE_LIMITED_TRIES = 30  # 429s in a row for one call before the run stops
GROW_AFTER = 4  # batches in a row without a 429 before the batch size doubles again
# The item or text a refusal names: vectord's `items[3].text`, embedd's `texts[3]`.
_NAMED = re.compile(r"^(?:items|texts)\[(\d+)\]")


@dataclass(frozen=True)
class Doc:
    """One document to store: an item without its vector."""

    id: str
    text: str
    title: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    language: str | None = None
    group: str = ""  # what fails together (syncd: the page); "": the document alone
    embedded_from: str | None = None  # what the model reads (default: title and text)

    @property
    def key(self) -> str:
        """The name a failure is reported under: its group, else its id."""
        return self.group or self.id

    def embed_text(self) -> str:
        return self.embedded_from if self.embedded_from is not None else embed_text(
            self.title, self.text)

    def content_hash(self) -> str:
        """The hash vectord reports for this document once stored (its /ids listing)."""
        return content_hash(self.title, self.text, self.tags, self.metadata, self.language)

    def item(self, vector: list[float]) -> Item:
        return Item(id=self.id, vector=vector, text=self.text, title=self.title,
                    tags=list(self.tags or []), metadata=self.metadata,
                    language=self.language or None)


def changed(docs: Sequence[Doc], stored: Mapping[str, str]
            ) -> tuple[list[Doc], list[Doc], int]:
    """(to write, empty, unchanged): the documents new or changed against the stored
    content hashes (id -> hash); those with nothing to embed (no title, no text: never
    sent, embedd refuses a blank text); how many are stored as they are."""
    todo: list[Doc] = []
    empty: list[Doc] = []
    unchanged = 0
    for doc in docs:
        if not doc.embed_text().strip():
            empty.append(doc)
        elif stored.get(doc.id) == doc.content_hash():
            unchanged += 1
        else:
            todo.append(doc)
    return todo, empty, unchanged


class Embedded(Protocol):
    @property
    def model(self) -> str: ...

    @property
    def vectors(self) -> list[list[float]]: ...


class Embedder(Protocol):
    """embedd, directly (internal.clients.embed) or through the gateway (the public client)."""

    async def embed(self, texts: list[str], *,
                    input_type: Literal["document", "query"] = ...,
                    model: str | None = ...) -> Embedded: ...


class Store(Protocol):
    """vectord, directly (internal.clients.vectord) or through the gateway."""

    async def upsert(self, name: str, items: Sequence[Item], model: str | None = ...) -> int: ...

    async def delete_items(self, name: str, ids: list[str]) -> int: ...


class StackFailure(Exception):
    """The stack failed, not a document: the run stops (the cause is kept)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(describe(cause))
        self.cause = cause


@dataclass
class Report:
    upserted: int = 0
    embedded: int = 0  # texts embedded (a document refused after embedding counts too)
    deleted: int = 0
    # document id or group -> (stage "write" or "delete", the error)
    failed: dict[str, tuple[str, Exception]] = field(default_factory=dict)


class Pipeline:
    """Writes documents into one corpus (see the module's docstring).

    concurrency: batches in flight at once. retries: attempts more for a call answered
    503 or 504 (the stack busy), waiting 2, 4, ... s; `notice` hears of each. progress:
    called with the number of documents of each batch done (written or failed).
    `size` is the batch size in use: `batch`, less after 429s. model_of: the corpus's
    model as it is now (asked after a `model_mismatch`; None: such a refusal stands).
    """

    def __init__(self, store: Store, embedder: Embedder, corpus: str, *,
                 model: str | None = None, batch: int = 64, concurrency: int = 1,
                 stop_on_stack_failure: bool = True, retries: int = 0,
                 notice: Callable[[str], None] | None = None,
                 progress: Callable[[int], object] | None = None,
                 model_of: Callable[[], Awaitable[str | None]] | None = None) -> None:
        if batch < 1 or concurrency < 1 or retries < 0:
            raise ValueError("batch and concurrency must be >= 1, retries >= 0")
        self.store = store
        self.embedder = embedder
        self.corpus = corpus
        self.model = model
        self.batch = batch
        self.concurrency = concurrency
        self.stop = stop_on_stack_failure
        self.retries = retries
        self.notice = notice
        self.progress = progress
        self.model_of = model_of
        self.report = Report()
        self.size = batch
        self._fine = 0  # batches done in a row without a 429

    async def write(self, docs: Sequence[Doc]) -> Report:
        """Embed and upsert every document, `batch` at a time; StackFailure when the
        stack fails and the pipeline stops on that (the other batches in flight finish)."""
        todo = list(docs)
        todo.reverse()
        stopped: list[StackFailure] = []

        async def worker() -> None:
            while todo and not stopped:
                # Taken at the size in use now: a 429 makes the next batches smaller.
                batch = [todo.pop() for _ in range(min(self.size, len(todo)))]
                try:
                    limited = await self._send(batch)
                except StackFailure as exc:
                    stopped.append(exc)
                    return
                self._adapt(limited)
                if self.progress is not None:
                    self.progress(len(batch))

        # Every worker ends on its own (no cancellation): no call is cut short.
        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        if stopped:
            raise stopped[0]
        return self.report

    async def delete_stale(self, stale: Mapping[str, Sequence[str]]) -> Report:
        """Delete the stored ids no longer wanted (group or document -> ids), but never
        those of a group whose writing failed in this run."""
        ids = [(key, i) for key in sorted(stale) if key not in self.report.failed
               for i in stale[key]]
        for n in range(0, len(ids), DELETE_BATCH):
            part = ids[n:n + DELETE_BATCH]
            ids_of_part = [i for _, i in part]
            try:
                self.report.deleted += await self._retrying(
                    partial(self.store.delete_items, self.corpus, ids_of_part), "delete")
            except (LakehouseError, aiohttp.ClientError) as exc:
                if self.stop:
                    raise StackFailure(exc) from None
                for key in dict.fromkeys(key for key, _ in part):
                    self.report.failed[key] = ("delete", exc)
        return self.report

    def _adapt(self, limited: bool) -> None:
        """Half the batch size after a batch met a 429; double it (up to `batch`) after
        GROW_AFTER batches in a row met none."""
        if limited:
            self._fine = 0
            if self.size > 1:
                self.size = max(1, self.size // 2)
                if self.notice is not None:
                    self.notice(f"rate limited (429): batches of {self.size} from now on")
            return
        self._fine += 1
        if self._fine >= GROW_AFTER and self.size < self.batch:
            self._fine = 0
            self.size = min(self.batch, self.size * 2)

    async def _send(self, batch: list[Doc]) -> bool:
        """Write one batch; whether a call of it was answered 429 on the way."""
        limited: list[None] = []  # one entry per 429 this batch's calls met
        await self._write(batch, limited)
        return bool(limited)

    async def _write(self, batch: list[Doc], limited: list[None]) -> None:
        pending = list(batch)
        vectors: dict[str, list[float]] = {}
        model = self.model
        switched = False
        while pending:
            stage = [d for d in pending if d.id not in vectors]  # what the failing call sent
            try:
                if stage:
                    texts = [d.embed_text() for d in stage]
                    emb = await self._retrying(partial(
                        self.embedder.embed, texts, input_type="document", model=self.model),
                        "embed", limited)
                    if len(emb.vectors) != len(stage):
                        raise UpstreamError(f"embedd returned {len(emb.vectors)} vectors for "
                                            f"{len(stage)} texts")
                    self.report.embedded += len(stage)
                    vectors.update(zip((d.id for d in stage), emb.vectors, strict=True))
                    model = emb.model
                stage = pending
                items = [d.item(vectors[d.id]) for d in pending]
                n = await self._retrying(partial(self.store.upsert, self.corpus, items, model),
                                         "upsert", limited)
            except (LakehouseError, aiohttp.ClientError) as exc:
                if not switched and await self._switched(exc, model):
                    switched = True  # the corpus moved to another model: embed again
                    vectors.clear()
                    continue
                if not blames_input(exc):
                    if self.stop:
                        raise StackFailure(exc) from None
                    self._fail(pending, exc)
                    return
                named = _named(exc, len(stage))
                keys = list(dict.fromkeys(d.key for d in pending))
                if named is not None:
                    key = stage[named].key
                elif len(keys) == 1:
                    key = keys[0]
                else:  # refused without naming a document: each group alone
                    for k in keys:
                        await self._write([d for d in pending if d.key == k], limited)
                    return
                self._fail([d for d in pending if d.key == key], exc)
                pending = [d for d in pending if d.key != key]
                continue
            self.report.upserted += n
            return

    async def _switched(self, exc: Exception, model: str | None) -> bool:
        """Whether exc refused vectors of `model` for a corpus now of another model
        (then the pipeline embeds with that one from now on)."""
        if getattr(exc, "code", None) != "model_mismatch" or self.model_of is None:
            return False
        try:
            now = await self.model_of()
        except (LakehouseError, aiohttp.ClientError):
            return False  # the refusal stands, as it would without asking
        if now is None or now == model:
            return False
        self.model = now
        return True

    def _fail(self, docs: list[Doc], exc: Exception) -> None:
        for key in dict.fromkeys(d.key for d in docs):
            self.report.failed.setdefault(key, ("write", exc))

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str,
                        limited: list[None] | None = None) -> T:
        return await retrying(call, what, self.retries, self.notice,
                              None if limited is None else partial(limited.append, None))


async def retrying(call: Callable[[], Awaitable[T]], what: str, retries: int,
                   notice: Callable[[str], None] | None = None,
                   limited: Callable[[], None] | None = None) -> T:
    """call(), and again up to `retries` times while the stack answers 503 or 504 (busy,
    starting), waiting 2, 4, ... s; `notice` hears of each retry. A 429 (past the
    client's share) is waited out, its Retry-After (1 s when it has none), and sent again
    up to RATE_LIMITED_TRIES times in a row; `limited` hears of each."""
    attempt = 1
    limited_in_a_row = 0
    while True:
        try:
            return await call()
        except TooManyRequests as exc:
            limited_in_a_row += 1
            if limited_in_a_row > RATE_LIMITED_TRIES:
                raise
            if limited is not None:
                limited()
            await asyncio.sleep(exc.retry_after if exc.retry_after is not None else 1.0)
        except LakehouseError as exc:
            if attempt > retries or exc.status not in (503, 504):
                raise
            if notice is not None:
                notice(f"{what}: {describe(exc)}; retrying ({attempt}/{retries})")
            await asyncio.sleep(2.0 * attempt)
            attempt += 1


def _named(exc: Exception, n: int) -> int | None:
    """The index of the document a refusal names, if it names one of the n sent."""
    m = _NAMED.match(getattr(exc, "field", None) or "")
    return int(m.group(1)) if m is not None and int(m.group(1)) < n else None
