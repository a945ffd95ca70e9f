"""Moving a corpus to another embedding model without downtime.

`POST /v1/vectors/corpora/{name}/reembed {"model"}` checks the model with embedd (its
dimension comes from the answer), then a background job embeds the stored texts again
in batches into a second vector column (storage/reembed_sql.py). Searches keep the old
vectors until every item has a new one; writes meanwhile reach both (a changed item is
embedded again); then one transaction switches. The job's state lives in PostgreSQL, so
a restart resumes it, on whichever vectord takes it first (one at a time per corpus).

embedd's model listing may say that a model is superseded by another (the local model's
numerics, docs/decisions/0034-integer-model-id.md): at start and at every scan, each corpus
of a superseded model with no job yet is moved to the model replacing it, by the same
job. A new stack has no such corpus and moves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import psycopg
import structlog

from internal.api.responses import Reembedding, ReembedStarted
from internal.api.vectord import MAX_DIM, Corpus, embed_text
from internal.clients.embed import EmbedClient
from internal.common import waits
from internal.common.errors import Conflict, InvalidArgument, LakehouseError, Unavailable
from internal.pg.resilient import CODE as POSTGRES_DOWN
from internal.vectord.storage import convert, reindex
from internal.vectord.storage.reembed_sql import Job
from internal.vectord.storage.store import Store

log = structlog.get_logger()

BATCH = 64  # texts per embedding call
RETRY_SECONDS = 5.0  # after a failed batch (embedd down): the job is tried again then
# Session advisory lock class: the vectord running a corpus's job holds (class, corpus id).
JOB_LOCK_CLASS = 0x5EE
PG_RETRY_SECONDS = 2.0  # a job interrupted by PostgreSQL going away is tried again after this
SCAN_SECONDS = 30.0  # pending jobs and superseded models are looked for this often


class Reembedder:
    """Starts re-embeddings and runs them in the background of one vectord."""

    def __init__(self, store: Store, embed: EmbedClient | None) -> None:
        self.store = store
        self.embed = embed
        self.wake = asyncio.Event()
        self.running: set[int] = set()
        self.checked = asyncio.Event()  # set after each look for superseded models
        self.moved: list[str] = []  # the corpora this vectord began moving that way
        self._check_retry = RETRY_SECONDS

    async def start(self, corpus: Corpus, model: str) -> ReembedStarted:
        """Check the model (400 naming it when embedd serves no such model; 409 when it
        is the corpus's already or a re-embedding runs) and begin; the progress."""
        model = model.strip()
        if not model:
            raise InvalidArgument("model: name the model to embed the corpus with",
                                  field="model")
        if self.embed is None:
            raise Unavailable("re-embedding needs embedd ([vectord] embedd_url is empty)",
                              code="embedd_unavailable")
        try:
            probe = await self.embed.embed(["dimension probe"], input_type="document",
                                           model=model)
        except InvalidArgument as exc:  # embedd's 400: no backend serves that model
            raise InvalidArgument(f"model: {exc.message}", field="model") from None
        if probe.model == corpus.model:
            raise Conflict(f"model: corpus {corpus.name!r} already holds vectors of model "
                           f"{probe.model!r}", field="model")
        if not 1 <= probe.dim <= MAX_DIM:
            raise InvalidArgument(f"model: {probe.model!r} makes {probe.dim}-dimensional "
                                  f"vectors; an index holds at most {MAX_DIM}", field="model")
        started = await self.store.start_reembed(corpus, probe.model, probe.dim)
        state = await self.store.reembed_progress(corpus)
        if not started:
            shown = None if state is None else msgspec.structs.asdict(state)
            raise Conflict(f"corpus {corpus.name!r} is being re-embedded already: {shown}",
                           code="reembed_running", field="model")
        self.wake.set()
        log.info("reembed_started", corpus=corpus.name, model=probe.model, dim=probe.dim)
        if state is None:  # the job is gone already (switched meanwhile): nothing left to do
            state = Reembedding(model=probe.model, dim=probe.dim, done=0, total=0)
        return ReembedStarted(corpus=corpus.name, **msgspec.structs.asdict(state))

    async def supersede(self) -> list[str]:
        """Begin moving each corpus whose model embedd lists as superseded to the model
        replacing it; the corpora begun. Idempotent: a corpus has one job at most (in
        PostgreSQL), and one with a job is left to it."""
        if self.embed is None:
            return []
        moves = await self.embed.superseded()
        begun: list[str] = []
        for corpus in await self.store.corpora_to_move(sorted(moves)) if moves else []:
            assert corpus.model is not None
            try:
                await self.start(corpus, moves[corpus.model])
            except Conflict:
                continue  # another vectord began it meanwhile
            except LakehouseError as exc:  # e.g. embedd no longer serves the new model
                log.warning("reembed_supersede_failed", corpus=corpus.name, error=exc.message)
                continue
            log.info("reembed_superseded", corpus=corpus.name, model=corpus.model,
                     to=moves[corpus.model])
            begun.append(corpus.name)
        return begun

    async def _check_superseded(self) -> None:
        """supersede(), its failure (embedd not answering yet: the stack starting) tried
        again soon, then less and less often (up to every scan); a warning once the
        failures have lasted that long."""
        try:
            self.moved += await self.supersede()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            lasting = self._check_retry >= SCAN_SECONDS
            (log.warning if lasting else log.info)("reembed_supersede_check_failed",
                                                   error=str(exc))
            asyncio.get_running_loop().call_later(self._check_retry, self.wake.set)
            self._check_retry = min(2 * self._check_retry, SCAN_SECONDS)
            return
        self._check_retry = RETRY_SECONDS
        self.checked.set()

    async def run_forever(self) -> None:
        """Move corpora of superseded models, and run every pending job (at start-up,
        when woken, and every SCAN_SECONDS)."""
        while True:
            await self._check_superseded()
            try:
                for corpus_id in await self.store.reembed_jobs():
                    if corpus_id not in self.running:
                        self.running.add(corpus_id)
                        task = asyncio.create_task(self._run(corpus_id))
                        task.add_done_callback(self._finished(corpus_id))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("reembed_scan_failed", error=str(exc))
            await waits.event(self.wake, SCAN_SECONDS)
            self.wake.clear()

    def _finished(self, corpus_id: int) -> Any:
        def done(_task: asyncio.Task[None]) -> None:
            self.running.discard(corpus_id)
        return done

    async def _run(self, corpus_id: int) -> None:
        """One corpus's job, under a session lock so that one vectord runs it."""
        store = self.store
        async with store.pool.connection() as lock_conn:
            cur = await lock_conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                          (JOB_LOCK_CLASS, corpus_id))
            row = await cur.fetchone()
            if not (row and row[0]):
                return  # another vectord runs it
            try:
                await self._job(corpus_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if getattr(exc, "code", None) == POSTGRES_DOWN:
                    # The server went away (a restart, an HA failover): the job is not at
                    # fault; it stays pending and is picked up again once PostgreSQL is back.
                    log.warning("reembed_interrupted", corpus_id=corpus_id, error=str(exc))
                    asyncio.get_running_loop().call_later(PG_RETRY_SECONDS, self.wake.set)
                    return
                log.warning("reembed_failed", corpus_id=corpus_id, error=str(exc))
                with contextlib.suppress(Exception):
                    await store.reembed_fail(corpus_id, str(exc))
            finally:
                # On a connection lost with its server the lock is gone already.
                with contextlib.suppress(psycopg.Error):
                    await lock_conn.execute("SELECT pg_advisory_unlock(%s, %s)",
                                            (JOB_LOCK_CLASS, corpus_id))

    @staticmethod
    async def _vectors(embed: EmbedClient, job: Job,
                       rows: list[dict[str, Any]]) -> list[list[float]]:
        """The rows' stored texts embedded by the job's model."""
        got = await embed.embed([embed_text(r["title"], r["text"]) for r in rows],
                                input_type="document", model=job.model)
        if got.dim != job.dim:
            raise Unavailable(f"model {job.model!r} answered {got.dim} dimensions, "
                              f"not {job.dim}")
        return got.vectors

    async def _later(self, corpus_id: int, error: str) -> None:
        """A batch failed (embedd down, a model gone): the error shows in the progress,
        the job is let go (another vectord may take it) and tried again soon."""
        await self.store.reembed_fail(corpus_id, error)
        asyncio.get_running_loop().call_later(RETRY_SECONDS, self.wake.set)

    async def _job(self, corpus_id: int) -> None:
        store = self.store
        while True:
            job = await store.reembed_job(corpus_id)
            corpus = await store.corpus_by_id(corpus_id)
            if job is None or corpus is None:
                return  # switched by another vectord, or its corpus deleted: nothing left
            if job.kind == "reindex" and job.hnsw_m is not None:
                await reindex.run(store, corpus_id, job.hnsw_m,
                                  job.hnsw_ef_construction or 2 * job.hnsw_m, store.corpus_by_id)
                return
            if job.kind == "convert" and job.precision is not None:
                try:
                    await convert.run(store, corpus_id, job.precision, job.position)
                except LakehouseError as exc:
                    await self._later(corpus_id, exc.message)
                return
            if self.embed is None:
                await store.reembed_fail(corpus_id, "embedd is not configured")
                return
            model, dim = job.model, job.dim
            vectors = functools.partial(self._vectors, self.embed, job)
            try:
                if await self._fill(corpus_id, vectors):
                    continue
                # The last few: the graph over the new vectors, then the rest embedded
                # under the write lock and the switch, in one transaction.
                await store.reembed_build_index(corpus, dim)
                if await store.reembed_switch(corpus, model, dim, BATCH, vectors):
                    log.info("reembed_switched", corpus=corpus.name, model=model, dim=dim)
                    return
            except LakehouseError as exc:
                await self._later(corpus_id, exc.message)
                return

    async def _fill(self, corpus_id: int, vectors: Callable[[list[dict[str, Any]]],
                                                            Awaitable[list[list[float]]]]) -> bool:
        """One pass over the items without their new vector, in full batches, the next
        batch embedded while one is stored (embedd's bulk lane never waits for a write);
        False when the pass met none but a last partial batch (then: the switch)."""
        store = self.store
        rows = await store.reembed_pending(corpus_id, BATCH)
        if len(rows) < BATCH:
            return False
        embedding = asyncio.ensure_future(vectors(rows))
        try:
            while rows:
                nxt = await store.reembed_pending(corpus_id, BATCH, after=rows[-1]["id"])
                following = asyncio.ensure_future(vectors(nxt)) if len(nxt) == BATCH else None
                try:
                    await store.reembed_fill(corpus_id, rows, await embedding)
                except BaseException:
                    if following is not None:
                        following.cancel()
                    raise
                if following is None:
                    return True  # the rest (fewer than a batch) are the next pass's
                rows, embedding = nxt, following
        finally:
            if not embedding.done():
                embedding.cancel()
        return True
