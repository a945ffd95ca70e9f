"""One task of documents, run: the documents chunked and compared with what the corpus
holds, the changed chunks embedded with the corpus's model on embedd's bulk lane, and each
round of documents written in one transaction (a document's chunks, its stale chunks
removed, its registry row). Rounds overlap: the next one is chunked and embedded while one
is written, so embedd never waits for PostgreSQL.

Retries are safe: a chunk stored with the same content hash is not embedded again, so a
task run again after a restart (or sent twice) skips what went in. A document the service
refuses (its text too large to index, a chunk id another document holds, the embedder
refusing its text) is a TaskError; the others go in. A failure of the stack (embedd or
PostgreSQL unreachable, busy, slow) is `StackTrouble`: the runner tries the task again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import aiohttp

from internal.api import validate
from internal.api.vectord import Corpus
from internal.clients.embed import EmbedClient
from internal.common import language
from internal.common.errors import LakehouseError, blames_input, describe
from internal.common.packing import packed
from internal.ingest.documents import ChunkItem, chunk_items
from internal.vectord.judging import Judge
from internal.vectord.storage.documents import DocumentWrite
from internal.vectord.storage.items import PreparedItem
from internal.vectord.storage.store import Store
from lakehouse.wire.documents import (
    MAX_TASK_ERRORS,
    AddDocuments,
    DocumentIn,
    TaskCounts,
    TaskError,
    TaskTimings,
    document_hash,
)

T = TypeVar("T")
EMBED_BATCH = 64  # chunks per embedding call (the sync's batch)
ROUND_CHUNKS = 256  # chunks a round writes in one transaction (at most; a document whole)


class StackTrouble(Exception):
    """The stack failed the task, not a document: it is tried again later."""


class TaskFailed(Exception):
    """The task as a whole cannot run (its corpus gone, its model not served)."""


@dataclass
class Progress:
    """What a task did so far; `report` hears of each round."""

    counts: TaskCounts
    errors: list[TaskError] = field(default_factory=list)
    timings: TaskTimings = field(default_factory=TaskTimings)
    failed: set[str] = field(default_factory=set)  # the documents refused, all of them

    def fail(self, doc_id: str, exc: LakehouseError | str, field: str | None = None) -> None:
        if doc_id in self.failed:
            return
        self.failed.add(doc_id)
        self.counts.failed += 1
        if len(self.errors) >= MAX_TASK_ERRORS:
            return
        if isinstance(exc, str):
            self.errors.append(TaskError(doc_id, "invalid_argument", exc, field))
        else:
            self.errors.append(TaskError(doc_id, exc.code, exc.message, field or exc.field))


@dataclass
class Planned:
    """One document of a round: its chunks, those to embed, its stale chunks."""

    doc: DocumentIn
    items: list[ChunkItem]
    todo: list[ChunkItem]
    stale: list[str]
    new: bool
    content_hash: str
    stored_hash: str | None  # the registry's (None: not registered)
    language: str | None = None
    vectors: dict[str, list[float]] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        """Its chunks stored as they are (its registry row may still be written)."""
        return not self.todo and not self.stale

    @property
    def to_write(self) -> bool:
        return not self.unchanged or self.stored_hash != self.content_hash


def _rounds(docs: Sequence[DocumentIn], req: AddDocuments) -> list[list[DocumentIn]]:
    """Consecutive documents, about ROUND_CHUNKS chunks a round (a document never split)."""
    return packed(docs, lambda doc: len(doc.chunks) if doc.chunks is not None else max(
        1, len(doc.text) // req.chunk_chars + 1), ROUND_CHUNKS)


class Writer:
    """Runs add tasks into one corpus."""

    def __init__(self, store: Store, embed: EmbedClient, judge: Judge, corpus: Corpus,
                 report: Callable[[Progress, int], Awaitable[None]]) -> None:
        self.store = store
        self.embed = embed
        self.judge = judge
        self.corpus = corpus
        self.report = report
        self.model = corpus.model

    async def add(self, req: AddDocuments, progress: Progress, start: int = 0) -> None:
        """Every document of the request from `start` on written (or refused, each
        alone); `report` hears after each round how many documents are done."""
        rounds = _rounds(req.documents[start:], req)
        ready: asyncio.Queue[tuple[list[Planned], int] | None] = asyncio.Queue(maxsize=1)

        async def produce() -> None:
            for docs in rounds:
                await ready.put((await self._prepare(docs, req, progress), len(docs)))
            await ready.put(None)

        producer = asyncio.create_task(produce())
        position = start
        try:
            while (got := await _next(ready, producer)) is not None:
                planned, n = got
                started = time.perf_counter()
                await self._write(planned, progress)
                progress.timings.write_ms += (time.perf_counter() - started) * 1000
                position += n
                await self.report(progress, position)
            await producer
        finally:
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)

    async def _prepare(self, docs: list[DocumentIn], req: AddDocuments,
                       progress: Progress) -> list[Planned]:
        """A round chunked, compared with the corpus, its languages settled and its
        changed chunks embedded."""
        started = time.perf_counter()
        planned = await self._plan(docs, req, progress)
        progress.timings.chunk_ms += (time.perf_counter() - started) * 1000
        await self._languages(planned)
        started = time.perf_counter()
        await self._embed(planned, progress)
        progress.timings.embed_ms += (time.perf_counter() - started) * 1000
        return [p for p in planned if p.doc.id not in progress.failed]

    async def _plan(self, docs: list[DocumentIn], req: AddDocuments,
                    progress: Progress) -> list[Planned]:
        items = await asyncio.to_thread(
            lambda: [chunk_items(d, req.chunking, req.chunk_chars) for d in docs])
        try:
            stored = await self.store.stored_documents(self.corpus, [d.id for d in docs])
            state = await self.store.chunk_state(
                self.corpus, [c.id for cs in items for c in cs])
        except LakehouseError as exc:
            raise StackTrouble(describe(exc)) from exc
        out = []
        for doc, chunks in zip(docs, items, strict=True):
            held = stored[doc.id]
            taken = next((c.id for c in chunks if state.get(c.id, ("", None))[1]
                          not in (None, doc.id)), None)
            if taken is not None:
                progress.fail(doc.id, LakehouseError(
                    f"chunk id {taken!r} is a chunk of document {state[taken][1]!r}; "
                    "choose another document id", code="id_taken"), "id")
                continue
            todo = [c for c in chunks if doc.vector is not None
                    or state.get(c.id, ("", None))[0] != c.hash]
            ids = {c.id for c in chunks}
            out.append(Planned(
                doc, chunks, todo, sorted(held.ids() - ids),
                new=held.chunks is None and not held.orphans,
                content_hash=document_hash(doc, req.chunking, req.chunk_chars),
                stored_hash=held.content_hash))
        return out

    async def _languages(self, planned: list[Planned]) -> None:
        """Each document's language once, for all its chunks: told, the corpus's, or
        judged over its text and settled against the corpus's prior (as an upsert's)."""
        corpus_language = self.corpus.language
        detect: list[Planned] = []
        for p in planned:
            if not p.todo:
                continue
            p.language = language.fixed_language(p.doc.language, corpus_language, "language")
            if p.language is None:
                detect.append(p)
        if not detect:
            return
        verdicts = await self.judge.verdicts(["\n\n".join(c.text for c in p.items)
                                              for p in detect])
        counts = dict(await self.store.language_counts(self.corpus))
        for v in verdicts:
            if v.language is not None:
                counts[v.language] = counts.get(v.language, 0) + 1
        prior = language.dominant(counts)
        for p, v in zip(detect, verdicts, strict=True):
            p.language = language.settle(v, prior)

    async def _embed(self, planned: list[Planned], progress: Progress) -> None:
        """The changed chunks' vectors (a document's own vector as given), EMBED_BATCH
        texts a call; a text embedd refuses costs its document only."""
        for p in planned:
            if p.doc.vector is not None:
                p.vectors = {c.id: p.doc.vector for c in p.todo}
        todo = [(p, c) for p in planned if p.doc.vector is None for c in p.todo]
        for start in range(0, len(todo), EMBED_BATCH):
            part = [(p, c) for p, c in todo[start:start + EMBED_BATCH]
                    if p.doc.id not in progress.failed]
            while part:
                try:
                    got = await self.embed.embed([c.embed_text for _, c in part],
                                                 input_type="document", model=self.model)
                except (LakehouseError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    part = self._refused(part, exc, progress)
                    continue
                if got.dim != self.corpus.dim:
                    raise TaskFailed(f"model {got.model!r} makes {got.dim}-dimensional "
                                     f"vectors; corpus {self.corpus.name!r} holds {self.corpus.dim}")
                self.model = self.model or got.model
                for (p, c), vector in zip(part, got.vectors, strict=True):
                    p.vectors[c.id] = vector
                progress.counts.embedded += len(part)
                progress.counts.embed_calls += 1
                break

    def _refused(self, part: list[tuple[Planned, ChunkItem]], exc: Exception,
                 progress: Progress) -> list[tuple[Planned, ChunkItem]]:
        """The call without the document whose text embedd refused; the stack's trouble
        and a refusal naming no text raise."""
        if not blames_input(exc):
            raise StackTrouble(describe(exc)) from exc
        assert isinstance(exc, LakehouseError)
        index = _text_index(exc.field, len(part))
        if index is None:
            raise TaskFailed(f"embedd refused the documents: {describe(exc)}") from exc
        bad = part[index][0].doc.id
        progress.fail(bad, exc, "text")
        return [(p, c) for p, c in part if p.doc.id != bad]

    async def _write(self, planned: list[Planned], progress: Progress) -> None:
        """The round in one transaction; when a document fails it, the round is written
        one document at a time, and only that one is refused."""
        writes = [(p, self._write_of(p)) for p in planned if p.to_write]
        try:
            if writes:
                await self._commit([w for _, w in writes])
        except LakehouseError as exc:
            if not blames_input(exc):
                raise StackTrouble(describe(exc)) from exc
            if len(writes) == 1:
                progress.fail(writes[0][0].doc.id, exc)
            else:
                for p, w in writes:
                    try:
                        await self._commit([w])
                    except LakehouseError as one:
                        if not blames_input(one):
                            raise StackTrouble(describe(one)) from one
                        progress.fail(p.doc.id, one)
        self._count(planned, progress)

    async def _commit(self, writes: list[DocumentWrite]) -> None:
        """One transaction; a corpus moved to another model meanwhile (a re-embedding's
        switch) or a registry row gone stale is the stack's moment: the task goes again."""
        try:
            await self.store.write_documents(self.corpus, writes, self.model)
        except LakehouseError as exc:
            if exc.code == "model_mismatch":
                raise StackTrouble(describe(exc)) from exc
            raise

    def _write_of(self, p: Planned) -> DocumentWrite:
        items = [PreparedItem(
            id=c.id, embedding=validate.vector(p.vectors[c.id], self.corpus.dim,
                                               self.corpus.metric, "vector",
                                               self.corpus.precision),
            title=c.title, text=c.text, tags=c.tags, metadata=c.metadata,
            language=p.language or language.SIMPLE, content_hash=c.hash) for c in p.todo]
        return DocumentWrite(id=p.doc.id, chunks=[c.id for c in p.items], title=p.doc.title,
                             language=p.doc.language, tags=list(p.doc.tags),
                             metadata=p.doc.metadata, content_hash=p.content_hash,
                             items=items, stale=p.stale)

    def _count(self, planned: list[Planned], progress: Progress) -> None:
        c = progress.counts
        for p in planned:
            if p.doc.id in progress.failed:
                continue
            if p.new:
                c.added += 1
            elif p.unchanged and p.doc.vector is None:
                c.unchanged += 1
            else:
                c.updated += 1
            c.chunks += len(p.todo)
            c.stale += len(p.stale)


async def _next(ready: asyncio.Queue[T | None], producer: asyncio.Task[None]) -> T | None:
    """The next round prepared, or the producer's failure as soon as it fails."""
    getting = asyncio.ensure_future(ready.get())
    await asyncio.wait({getting, producer}, return_when=asyncio.FIRST_COMPLETED)
    if getting.done():
        return getting.result()
    getting.cancel()
    producer.result()  # raises what the producer met
    return None


def _text_index(field_name: str | None, n: int) -> int | None:
    """The index of `texts[i]` an embedd refusal names, if it is one of the n sent."""
    if not field_name or not field_name.startswith("texts["):
        return None
    digits = field_name[len("texts["):].split("]", 1)[0]
    return int(digits) if digits.isdigit() and int(digits) < n else None

