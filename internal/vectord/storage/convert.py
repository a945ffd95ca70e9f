"""Moving a corpus's vectors to another precision without downtime.

`POST /v1/vectors/corpora/{name}/convert {"precision"}` starts a background job, run by the
re-embedding jobs' runner (storage/reembed.py: one job a corpus at a time, its state in
PostgreSQL, so a restart resumes it on whichever vectord takes it first): the items
copied in batches to a new table in the new precision (a SQL cast, no model), writes
mirrored meanwhile, its indexes built concurrently, then one switch
(storage/convert_sql.py). Searches read the old table throughout, the new one after.
"""

from __future__ import annotations

import asyncio

import structlog

from internal.api.responses import Conversion, ConvertStarted
from internal.api.vectord import Corpus
from internal.common.errors import Conflict
from internal.vectord.storage.store import Store

log = structlog.get_logger()

BATCH = 2000  # rows a copy transaction (the corpus's writers wait for one at most)
SWITCH_RETRY_SECONDS = 1.0


async def start(store: Store, corpus: Corpus, precision: str) -> ConvertStarted:
    """Begin (409 when the corpus is in that precision already, or a re-embedding or a
    conversion of it runs); the progress."""
    if corpus.precision == precision:
        raise Conflict(f"precision: corpus {corpus.name!r} is stored as {precision} already",
                       field="precision")
    if not await store.start_convert(corpus, precision):
        raise Conflict(f"corpus {corpus.name!r} is being re-embedded or converted already",
                       code="reembed_running", field="precision")
    log.info("convert_started", corpus=corpus.name, precision=precision)
    state = await store.convert_progress(corpus) or Conversion(
        precision=precision, done=0, total=0)  # type: ignore[arg-type]  # checked by the route
    return ConvertStarted(corpus=corpus.name, precision=state.precision, done=state.done,
                          total=state.total, state=state.state, error=state.error)


async def run(store: Store, corpus_id: int, precision: str, position: str | None) -> None:
    """One conversion to its end: the copy from `position` on, the indexes, the switch
    (tried again while the old table stays busy past the switch's lock timeout)."""
    after = position or ""
    while True:
        corpus = await store.corpus_by_id(corpus_id)
        if corpus is None:
            return  # deleted: its tables went with it
        if corpus.precision == precision:
            return  # switched by another vectord
        count, after = await store.convert_copy(corpus_id, after, BATCH)
        if count == BATCH:
            continue
        started = asyncio.get_running_loop().time()
        await store.convert_build(corpus, precision)
        log.info("convert_indexed", corpus=corpus.name, precision=precision,
                 seconds=round(asyncio.get_running_loop().time() - started, 1))
        if await store.convert_switch(corpus, precision):
            log.info("convert_switched", corpus=corpus.name, precision=precision)
            return
        await asyncio.sleep(SWITCH_RETRY_SECONDS)
