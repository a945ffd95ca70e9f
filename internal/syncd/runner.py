"""One sync run (scan, diff, embed, upsert, delete) and the lock that keeps runs apart.

Order of writes, so a crash anywhere loses nothing and the next run converges: a
page's new chunks are upserted before its stale chunks are deleted, and a page is
deleted only when its file is gone. Unchanged chunks (same content hash as vectord's
`/ids` listing) are never embedded again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Protocol

import aiohttp
import structlog

from internal.api.responses import Corpus, IdRow, ModelsResponse
from internal.api.vectord import Item, Metric
from internal.clients.embed import Embedding
from internal.clients.matrixd import MatrixdClient
from internal.common.errors import (
    Conflict,
    LakehouseError,
    NotFound,
    describe,
)
from internal.ingest import Pipeline
from internal.syncd import diff
from internal.syncd.languages import main_languages, settle_pages
from internal.syncd.pages import (
    Chunk,
    Page,
    Source,
    is_ignored,
    is_page,
    page_of_source,
    read_page,
)
from lakehouse.wire.models import model_for

log = structlog.get_logger()
ROOT = "."  # the `path` of an error that concerns the whole run, not one page
# Batches in flight at once: one is embedded while another is written, so embedd's bulk
# lane never waits for vectord (docs/decisions/0116-bulk-next-batch-in-flight.md).
INFLIGHT = 2

Progress = Callable[[int, int], None]  # (chunks embedded so far, chunks to embed)


class Embedder(Protocol):
    """What a run asks of the embedder: syncd's EmbedClient, or `lakehouse sync`'s
    gateway client (internal/cli/sync_cmd.py)."""

    async def models(self) -> ModelsResponse: ...

    async def default_model(self) -> tuple[str, int]: ...

    async def embed(self, texts: list[str], input_type: Literal["query", "document"] = ...,
                    model: str | None = ...) -> Embedding: ...


class Store(Protocol):
    """What a run asks of the store: syncd's VectordClient, or `lakehouse sync`'s gateway
    client (internal/cli/sync_cmd.py)."""

    async def ensure_corpus(self, name: str, dim: int, metric: Metric = ...,
                            language: str | None = ..., model: str | None = ...,
                            defer_index: bool = ...) -> tuple[Corpus, bool]: ...

    def iter_ids(self, name: str, prefix: str = ..., page: int = ...
                 ) -> AsyncIterator[IdRow]: ...

    async def delete_items(self, name: str, ids: list[str]) -> int: ...

    async def upsert(self, name: str, items: Sequence[Item], model: str | None = ...) -> int: ...

    async def get_corpus(self, name: str) -> Corpus: ...


@dataclass(frozen=True)
class SyncSettings:
    wiki_dir: Path
    corpus: str
    ignore: tuple[str, ...] = ("_index.md", ".*")
    languages: dict[str, str] = field(default_factory=dict)
    batch_size: int = 64
    chunk_chars: int = 2000
    normalize: bool = False  # needs a matrixd client: Syncer(..., matrixd=...)
    model: str | None = None  # a new corpus's model (None: by its pages' language)


@dataclass(frozen=True)
class PageError:
    path: str
    error: str


@dataclass
class RunResult:
    """The answer of POST /v1/sync/run (first six fields are the contract)."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    errors: list[PageError] = field(default_factory=list)
    seconds: float = 0.0
    pages: int = 0             # pages in the directory (after ignores)
    chunks: int = 0            # chunks those pages make
    ignored: int = 0           # files skipped by the ignore globs
    embedded_pages: int = 0    # pages with at least one chunk sent to the embedder
    embedded_chunks: int = 0
    embed_calls: int = 0
    embed_seconds: float = 0.0
    started_at: str = ""
    finished_at: str = ""
    # Not on the wire: the stack failed the run, or some of its pages (a daemon
    # unreachable, busy or slow), so the ticker tries again within seconds.
    transient: bool = False
    # What the run did but the user may not have meant (a language map's key that
    # matches no page); the run still succeeds.
    warnings: list[str] = field(default_factory=list)


# Answers that say "not now" rather than "not this": the stack's trouble of the moment.
_TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """Whether another try in a few seconds may succeed where this one failed."""
    if isinstance(exc, LakehouseError):
        return exc.status in _TRANSIENT_STATUSES
    return isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError))


@dataclass
class Scan:
    pages: dict[str, Page] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # path -> reason
    unlisted: dict[str, str] = field(default_factory=dict)    # folder -> reason
    ignored: int = 0
    sources: dict[str, Source] = field(default_factory=dict)  # read, language not settled

    def settle(self, settings: SyncSettings, corpus_language: str | None) -> None:
        """The pages of the sources read, each in its settled language."""
        langs = settle_pages(self.sources.values(), corpus_language)
        self.pages = {path: page_of_source(src, langs[path], settings.chunk_chars)
                      for path, src in self.sources.items()}

    def unmatched(self, languages: dict[str, str]) -> list[str]:
        """The language map's keys that named no page of this scan."""
        used = {src.mapped_by for src in self.sources.values()}
        return [f"languages: folder {key!r} matches no page" for key in languages
                if key not in used]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def scan(settings: SyncSettings) -> Scan:
    """Walk the wiki, read every page and judge its language (blocking: run it in a
    thread); `Scan.settle` then chunks them."""
    root = settings.wiki_dir
    out = Scan()

    def on_error(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        rel = where.relative_to(root).as_posix() if where != root else ROOT
        out.unlisted[rel] = f"cannot list folder: {exc.strerror or exc}"

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error):
        base = Path(dirpath)
        rel_dir = base.relative_to(root)
        kept_dirs = []
        for d in sorted(dirnames):
            if is_ignored((rel_dir / d).as_posix(), settings.ignore):
                out.ignored += 1
            else:
                kept_dirs.append(d)
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            if not is_page(name):
                continue
            rel = (rel_dir / name).as_posix()
            if is_ignored(rel, settings.ignore):
                out.ignored += 1
                continue
            try:
                text = (base / name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                out.unreadable[rel] = f"cannot read: {exc}"
                continue
            out.sources[rel] = read_page(rel, text, settings.languages, root.name)
    return out


class Normalizer:
    """Chunks rewritten by matrixd's /v1/matrix/normalize, remembered by original hash.

    Normalising is deterministic, so a normalised chunk's content hash is stable and
    the diff against vectord's /ids works unchanged; the memory spares matrixd the
    unchanged chunks of every later run (after a restart, one full pass).
    """

    BATCH = 256  # observations per call (the route takes up to 1,000)

    def __init__(self, matrixd: MatrixdClient) -> None:
        self.matrixd = matrixd
        self.memo: dict[str, tuple[str, str]] = {}  # original hash -> (text, keywords)

    async def apply(self, found: Scan) -> None:
        chunks = [c for page in found.pages.values() for c in page.chunks]
        todo = list({c.hash: c for c in chunks if c.hash not in self.memo}.values())
        for i in range(0, len(todo), self.BATCH):
            part = todo[i:i + self.BATCH]
            out = await self.matrixd.normalize([c.text for c in part])
            for c, o in zip(part, out.observations, strict=True):
                self.memo[c.hash] = (o.text, ", ".join(o.keywords))
        for path, page in found.pages.items():
            found.pages[path] = dataclasses.replace(
                page, chunks=tuple(self._rewrite(c) for c in page.chunks))

    def _rewrite(self, c: Chunk) -> Chunk:
        text, keywords = self.memo[c.hash]
        head = c.embed_text[:-len(c.text)] if c.text and c.embed_text.endswith(c.text) else ""
        return Chunk(id=c.id, text=text, title=c.title,
                     metadata={**c.metadata, "original": c.text, "keywords": keywords},
                     language=c.language, embed_text=head + text)


class Syncer:
    """Runs syncs of one directory into one corpus; never two at once."""

    def __init__(self, settings: SyncSettings, vectord: Store, embed: Embedder,
                 matrixd: MatrixdClient | None = None) -> None:
        self.settings = settings
        self.vectord = vectord
        self.embed = embed
        self.normalizer = Normalizer(matrixd) if settings.normalize and matrixd else None
        if settings.normalize and matrixd is None:
            raise ValueError("normalize needs a matrixd client")
        self._lock = asyncio.Lock()
        self._queued: asyncio.Future[RunResult] | None = None
        self.running = False
        self.runs = 0
        self.last: RunResult | None = None

    async def request_run(self, progress: Progress | None = None) -> RunResult:
        """Run after any active run finishes; callers that arrive while one is queued share it.

        A run that is already under way may have scanned the directory before the
        caller's edit, so an on-demand request never just returns the active run's result.
        """
        if self._queued is None or self._queued.done():
            self._queued = asyncio.ensure_future(self._run_locked(progress))
        return await asyncio.shield(self._queued)

    async def _run_locked(self, progress: Progress | None) -> RunResult:
        async with self._lock:
            self._queued = None  # from here on, a new request queues the next run
            self.running = True
            try:
                result = await self.run_once(progress)
            finally:
                self.running = False
            self.runs += 1
            self.last = result
            return result

    async def run_once(self, progress: Progress | None = None) -> RunResult:
        """One full pass; failures are reported in the result, never raised."""
        started = time.perf_counter()
        result = RunResult(started_at=_now())
        try:
            await self._run(result, progress)
        except (LakehouseError, aiohttp.ClientError, OSError) as exc:
            result.errors.append(PageError(ROOT, describe(exc)))
            result.transient = is_transient(exc)
            log.warning("sync_failed", corpus=self.settings.corpus, error=describe(exc))
        result.seconds = round(time.perf_counter() - started, 3)
        result.embed_seconds = round(result.embed_seconds, 3)
        result.finished_at = _now()
        log.info("sync_done", corpus=self.settings.corpus, added=result.added,
                 updated=result.updated, deleted=result.deleted, unchanged=result.unchanged,
                 errors=len(result.errors), embedded_chunks=result.embedded_chunks,
                 seconds=result.seconds)
        return result

    async def _ensure_corpus(self, found: Scan) -> tuple[str, str | None]:
        """The corpus's model and language; the corpus is created with language `auto` and
        the model asked for (`--model`), else the model embedd lists for the languages of
        the scanned pages (`lakehouse.wire.models.model_for`: the multilingual model for a
        wiki in languages the default model does not declare).

        A corpus built with a model embedd no longer serves, or with another model than
        the one asked for, fails the run up front (one error) instead of every page: a
        corpus changes model only when its owner re-embeds it.
        """
        name = self.settings.corpus
        info = await self.embed.models()
        wanted = self.settings.model or model_for(info, main_languages(found.sources.values()))
        dims = {m.id: m.dim or 0 for m in info.models}
        if dims.get(wanted, 0) <= 0:  # a remote backend learns its dimension on first use
            probe = await self.embed.embed(["dimension probe"], model=wanted)
            wanted, dims[wanted] = probe.model, probe.dim
        corpus, created = await self.vectord.ensure_corpus(name, dims[wanted], metric="cosine",
                                                           language="auto", model=wanted)
        if created:
            log.info("sync_corpus_created", corpus=name, model=wanted, dim=dims[wanted])
            return wanted, None
        model = corpus.model
        if model and model not in dims:
            raise Conflict(f"corpus {name!r} was built with model {model!r}, which embedd "
                           f"does not serve (it has {sorted(dims)})", code="model_mismatch")
        if self.settings.model and model != self.settings.model:
            raise Conflict(f"corpus {name!r} is on model {model!r}, not "
                           f"{self.settings.model!r}; move it with `lakehouse reembed "
                           f"{name} --model {self.settings.model}`", code="model_mismatch")
        return (model or wanted), (corpus.language or None)

    async def _corpus_model(self) -> str | None:
        """The corpus's model now (a re-embedding may have switched it during a run)."""
        return (await self.vectord.get_corpus(self.settings.corpus)).model or None

    async def _run(self, result: RunResult, progress: Progress | None) -> None:
        s = self.settings
        if not s.wiki_dir.is_dir():
            # Never "sync" a missing (unmounted, renamed) wiki: that would delete everything.
            raise NotFound(f"wiki_dir {str(s.wiki_dir)!r} is not a directory")
        found = await asyncio.to_thread(scan, s)
        result.ignored = found.ignored
        for path, reason in sorted({**found.unlisted, **found.unreadable}.items()):
            result.errors.append(PageError(path, reason))
        result.warnings = found.unmatched(s.languages)
        for warning in result.warnings:
            log.warning("sync_warning", corpus=s.corpus, warning=warning)

        model, corpus_language = await self._ensure_corpus(found)
        await asyncio.to_thread(found.settle, s, corpus_language)
        if self.normalizer is not None:
            await self.normalizer.apply(found)
        result.pages = len(found.pages)
        result.chunks = sum(len(p.chunks) for p in found.pages.values())
        stored: dict[str, str] = {}
        async for row in self.vectord.iter_ids(s.corpus):
            stored[row.id] = row.content_hash
        desired = {path: {c.id: c.hash for c in page.chunks} for path, page in found.pages.items()}
        p = diff.plan(desired, stored, unreadable=found.unreadable, unlisted=found.unlisted)
        result.unchanged = len(p.unchanged)

        chunk_by_id = {c.id: c for page in found.pages.values() for c in page.chunks}
        todo = [chunk_by_id[cid].doc(page) for page in sorted(p.embed) for cid in p.embed[page]]
        result.embedded_pages = len(p.embed)
        if progress:
            progress(0, len(todo))
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, len(todo))

        # A failure of the stack costs the batch's pages (reported), never the run.
        embedder = _Timed(self.embed, result)
        pipe = Pipeline(self.vectord, embedder, s.corpus, model=model, batch=s.batch_size,
                        concurrency=INFLIGHT, stop_on_stack_failure=False, progress=advance,
                        model_of=self._corpus_model)
        await pipe.write(todo)
        # Stale chunks go only after the page's new chunks are in (crash-safe order), and
        # never those of a page whose new chunks did not all go in.
        await pipe.delete_stale(p.stale)
        for page, (stage, exc) in sorted(pipe.report.failed.items()):
            why = describe(exc)
            result.errors.append(PageError(page, f"delete: {why}" if stage == "delete" else why))
            result.transient = result.transient or is_transient(exc)
            log.warning("sync_page_failed", page=page, stage=stage, error=why)
        failed = set(pipe.report.failed)
        result.embedded_chunks = embedder.texts
        result.added = sum(1 for page in p.added if page not in failed)
        result.updated = sum(1 for page in p.changed if page not in failed)
        result.deleted = sum(1 for page in p.deleted if page not in failed)


class _Timed:
    """The embedder, its calls, texts and seconds counted into the run's result."""

    def __init__(self, embed: Embedder, result: RunResult) -> None:
        self.embed_ = embed
        self.result = result
        self.texts = 0

    async def embed(self, texts: list[str], *, input_type: Literal["document", "query"] = "document",
                    model: str | None = None) -> Embedding:
        t0 = time.perf_counter()
        self.result.embed_calls += 1
        try:
            out = await self.embed_.embed(texts, input_type=input_type, model=model)
        finally:
            self.result.embed_seconds += time.perf_counter() - t0
        self.texts += len(texts)
        return out
