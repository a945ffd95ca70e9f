"""Load a data set's corpus into vectord, embedding only what is not there already.

The corpus is a cache: items whose content hash (vectord's /ids listing) equals the
document's are kept as they are, changed or missing ones are embedded and upserted,
and items no longer in the data set are deleted. A corpus made with another model
or dimension is dropped and rebuilt, since its vectors cannot be compared.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from internal.common.errors import ServiceError
from internal.common.hashing import content_hash
from internal.embed.client import EmbedClient
from internal.evaluation.beir import Doc
from internal.vectord.client import VectordClient

log = structlog.get_logger()

LANGUAGE = "english"  # every shared data set is English; fixed so hashes are stable
EMBED_BATCH = 64
UPSERT_BATCH = 500
INFLIGHT = 2  # batches embedded at once: keeps embedd busy while vectord writes

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class IngestReport:
    corpus: str
    model: str
    docs: int
    empty: int  # documents with neither title nor text: nothing to embed, not stored
    embedded: int
    reused: int
    deleted: int
    rebuilt: bool
    seconds: float


def doc_hash(doc: Doc) -> str:
    """The content hash vectord reports for this document stored as ingest() stores it."""
    return content_hash(doc.title or None, doc.text, [], doc.metadata, LANGUAGE)


def embed_text(doc: Doc) -> str:
    """What the model reads for a document: title and text, as BEIR's dense baselines do."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _item(doc: Doc, vector: list[float]) -> dict[str, Any]:
    item: dict[str, Any] = {"id": doc.id, "vector": vector, "text": doc.text,
                            "metadata": doc.metadata, "language": LANGUAGE}
    if doc.title:
        item["title"] = doc.title
    return item


async def default_model(ec: EmbedClient) -> tuple[str, int]:
    """The model embedd uses when none is named, and its dimension."""
    info = await ec.models()
    default = str(info["default"])
    models = info.get("models")
    for m in models if isinstance(models, list) else []:
        if isinstance(m, dict) and m.get("id") == default:
            return default, int(m["dim"])
    probe = await ec.embed(["dimension probe"], input_type="query")
    return probe.model, probe.dim


async def _open_corpus(vc: VectordClient, name: str, model: str, dim: int) -> tuple[bool, bool]:
    """Make sure the corpus exists for this model: (created, rebuilt)."""
    try:
        corpus = await vc.get_corpus(name)
    except ServiceError as exc:
        if exc.status != 404:
            raise
        corpus = None
    rebuilt = False
    if corpus is not None and (corpus.get("model") != model or int(corpus["dim"]) != dim):
        log.info("eval_corpus_rebuild", corpus=name, had_model=corpus.get("model"), model=model)
        await vc.delete_corpus(name)
        corpus, rebuilt = None, True
    if corpus is None:
        await vc.create_corpus(name, dim, "cosine", language=LANGUAGE, model=model)
        return True, rebuilt
    return False, rebuilt


async def ingest(vc: VectordClient, ec: EmbedClient, name: str, docs: Sequence[Doc],
                 progress: Progress | None = None) -> IngestReport:
    """Bring corpus `name` in line with docs; embed (input_type document) only what changed."""
    started = time.perf_counter()
    model, dim = await default_model(ec)
    _, rebuilt = await _open_corpus(vc, name, model, dim)
    empty = sum(1 for doc in docs if not embed_text(doc).strip())
    docs = [doc for doc in docs if embed_text(doc).strip()]
    stored = {row["id"]: row["content_hash"] async for row in vc.iter_ids(name)}
    wanted = {doc.id: doc_hash(doc) for doc in docs}
    todo = [doc for doc in docs if stored.get(doc.id) != wanted[doc.id]]
    stale = sorted(set(stored) - set(wanted))
    for i in range(0, len(stale), UPSERT_BATCH):
        await vc.delete_items(name, stale[i:i + UPSERT_BATCH])

    done = 0
    gate = asyncio.Semaphore(INFLIGHT)

    async def one(batch: Sequence[Doc]) -> None:
        nonlocal done
        async with gate:
            emb = await ec.embed([embed_text(d) for d in batch], input_type="document", model=model)
            await vc.upsert(name, [_item(d, v) for d, v in zip(batch, emb.vectors, strict=True)],
                            model=model)
        done += len(batch)
        if progress is not None:
            progress(done, len(todo))

    batches = [todo[i:i + EMBED_BATCH] for i in range(0, len(todo), EMBED_BATCH)]
    await asyncio.gather(*(one(b) for b in batches))
    report = IngestReport(corpus=name, model=model, docs=len(docs), empty=empty, embedded=len(todo),
                          reused=len(docs) - len(todo), deleted=len(stale), rebuilt=rebuilt,
                          seconds=time.perf_counter() - started)
    log.info("eval_ingested", corpus=name, embedded=report.embedded, reused=report.reused,
             deleted=report.deleted, seconds=round(report.seconds, 1))
    return report
